//! `cargo xtask install --prefix DIR`: the C and C++ library installed the
//! way C and C++ projects consume one (the layout a distribution package
//! has):
//!
//! ```text
//! DIR/include/fastio/{fastio.h, clara_fastio.h, fastio.hpp}
//! DIR/lib/libfastio.so.0.1.0, libfastio.so.0 -> …, libfastio.so -> …
//! DIR/lib/libfastio.a
//! DIR/lib/pkgconfig/fastio.pc
//! DIR/lib/cmake/fastio/{fastioConfig.cmake, fastioConfigVersion.cmake}
//! ```
//!
//! The shared library is `fastio-capi`'s cdylib, built in release with the
//! soname `libfastio.so.0`. `cargo-c` does the same job, but installing it
//! compiles cargo itself (minutes on CI's two cores) for a few files.
//!
//! Both `fastio.pc` and the CMake package find the prefix from their own
//! place, so an install can be moved. [`check`] (a step of `cargo xtask
//! ci`) installs into `target/`, moves the install, builds a C program with
//! `pkg-config` (whose paths must be the new place's) and the CMake project
//! `examples/cpp` with `find_package(fastio)` against it there, and runs
//! the C++ operators in the volume and streaming demos in place of the
//! Rust ones, whose outputs they must reproduce exactly.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::root;
use crate::step::{Step, cargo};

/// The workspace's version (`[workspace.package]` of the root
/// `Cargo.toml`), which every library crate takes.
fn version() -> &'static str {
    static VERSION: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    VERSION.get_or_init(|| {
        let manifest = std::fs::read_to_string(root().join("Cargo.toml")).unwrap_or_default();
        manifest
            .split("[workspace.package]")
            .nth(1)
            .and_then(|section| {
                section.lines().find_map(|l| {
                    let (key, value) = l.split_once('=')?;
                    (key.trim() == "version").then(|| value.trim().trim_matches('"').to_owned())
                })
            })
            .unwrap_or_else(|| "0.0.0".into())
    })
}

/// What the static library needs from the system (rustc's
/// `--print native-static-libs` for a Linux glibc target).
const NATIVE_STATIC_LIBS: [&str; 7] = ["gcc_s", "util", "rt", "pthread", "m", "dl", "c"];

/// `--prefix DIR` from the arguments after `install`.
pub(crate) fn parse_args(args: &[String]) -> Result<PathBuf, String> {
    match args {
        [flag, dir] if flag == "--prefix" => Ok(PathBuf::from(dir)),
        _ => Err("usage: cargo xtask install --prefix DIR".into()),
    }
}

fn major() -> &'static str {
    version().split('.').next().unwrap_or("0")
}

fn soname() -> String {
    format!("libfastio.so.{}", major())
}

/// Builds the library in release and installs it under `prefix`.
pub(crate) fn run(prefix: &Path) -> Result<(), String> {
    let version = version();
    let prefix = absolute(prefix)?;
    let soname = soname();
    Step::new(
        "install: build fastio-capi (release)",
        cargo([
            "rustc",
            "-p",
            "fastio-capi",
            "--release",
            "--lib",
            "--",
            "-C",
            &format!("link-arg=-Wl,-soname,{soname}"),
        ]),
    )
    .run()?;
    let built = root().join("target").join("release");
    let include = prefix.join("include").join("fastio");
    let lib = prefix.join("lib");
    let cmake = lib.join("cmake").join("fastio");
    let pkgconfig = lib.join("pkgconfig");
    for dir in [&include, &cmake, &pkgconfig] {
        std::fs::create_dir_all(dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    }
    let headers = root().join("crates").join("fastio-capi").join("include");
    for h in ["fastio.h", "clara_fastio.h", "fastio.hpp"] {
        copy(&headers.join(h), &include.join(h))?;
    }
    let real = format!("libfastio.so.{version}");
    copy(&built.join("libfastio_capi.so"), &lib.join(&real))?;
    copy(&built.join("libfastio_capi.a"), &lib.join("libfastio.a"))?;
    symlink(&real, &lib.join(&soname))?;
    symlink(&soname, &lib.join("libfastio.so"))?;
    write(&pkgconfig.join("fastio.pc"), &pkg_config())?;
    write(
        &cmake.join("fastioConfig.cmake"),
        &cmake_config(&real, &soname),
    )?;
    write(&cmake.join("fastioConfigVersion.cmake"), &cmake_version())?;
    println!("installed fastio {version} into {}", prefix.display());
    Ok(())
}

/// `p` with every link and `..` resolved.
fn canonical(p: &Path) -> Result<PathBuf, String> {
    p.canonicalize()
        .map_err(|e| format!("{}: {e}", p.display()))
}

/// Whether pkg-config's flags for fastio name the install at `prefix`
/// (after a move from `old`) and nothing else: its headers, its library
/// directory, and never the old place.
fn pkg_config_paths_are_in(
    cflags: &[String],
    libs: &[String],
    libdir: &str,
    prefix: &Path,
    old: &Path,
) -> Result<(), String> {
    let said = format!("cflags {cflags:?}, libs {libs:?}, libdir {libdir:?}");
    if said.contains(&old.display().to_string()) {
        return Err(format!(
            "pkg-config names the install's old place {}: {said}",
            old.display()
        ));
    }
    let include = cflags
        .iter()
        .filter_map(|f| f.strip_prefix("-I"))
        .map(|d| canonical(Path::new(d)))
        .collect::<Result<Vec<_>, _>>()?;
    let libdirs = libs
        .iter()
        .filter_map(|f| f.strip_prefix("-L"))
        .map(|d| canonical(Path::new(d)))
        .collect::<Result<Vec<_>, _>>()?;
    let (want_include, want_lib) = (prefix.join("include").join("fastio"), prefix.join("lib"));
    if include != [want_include.clone()]
        || libdirs != [want_lib.clone()]
        || canonical(Path::new(libdir))? != want_lib
    {
        return Err(format!(
            "pkg-config does not give the moved install's paths ({} and {}): {said}",
            want_include.display(),
            want_lib.display()
        ));
    }
    println!(
        "install: pkg-config gives the moved install's paths ({} and {})",
        want_include.display(),
        want_lib.display()
    );
    Ok(())
}

fn absolute(p: &Path) -> Result<PathBuf, String> {
    if p.is_absolute() {
        Ok(p.to_path_buf())
    } else {
        std::env::current_dir()
            .map(|d| d.join(p))
            .map_err(|e| format!("current directory: {e}"))
    }
}

fn copy(from: &Path, to: &Path) -> Result<(), String> {
    // Replace rather than write through: a running program may map the old
    // library.
    let _ = std::fs::remove_file(to);
    std::fs::copy(from, to)
        .map(|_| ())
        .map_err(|e| format!("copy {} to {}: {e}", from.display(), to.display()))
}

fn symlink(target: &str, link: &Path) -> Result<(), String> {
    let _ = std::fs::remove_file(link);
    std::os::unix::fs::symlink(target, link)
        .map_err(|e| format!("symlink {} -> {target}: {e}", link.display()))
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("write {}: {e}", path.display()))
}

/// `fastio.pc`, relocatable: its prefix is found from the file's own
/// place (`${pcfiledir}`, PREFIX/lib/pkgconfig), as the CMake package's
/// is, so an install that is moved (or packaged and unpacked elsewhere)
/// still gives its own paths.
fn pkg_config() -> String {
    let version = version();
    let private: Vec<String> = NATIVE_STATIC_LIBS
        .iter()
        .map(|l| format!("-l{l}"))
        .collect();
    format!(
        "prefix=${{pcfiledir}}/../..
exec_prefix=${{prefix}}
libdir=${{exec_prefix}}/lib
includedir=${{prefix}}/include

Name: fastio
Description: Typed N-dimensional data between processes, zero copies (C API; C++17 header fastio.hpp)
Version: {version}
Libs: -L${{libdir}} -lfastio
Libs.private: {}
Cflags: -I${{includedir}}/fastio
",
        private.join(" ")
    )
}

fn cmake_config(real: &str, soname: &str) -> String {
    format!(
        r#"# fastio's CMake package, written by `cargo xtask install`.
#
#   find_package(fastio {major}.{minor} REQUIRED)
#   target_link_libraries(app PRIVATE fastio::fastio)  # C: fastio.h, clara_fastio.h
#   target_link_libraries(app PRIVATE fastio::cxx)     # C++17: fastio.hpp (and the C API)
#   target_link_libraries(app PRIVATE fastio::static)  # C, the static library
#
# The package is relocatable: paths are found from this file's place,
# PREFIX/lib/cmake/fastio.
get_filename_component(_fastio_prefix "${{CMAKE_CURRENT_LIST_DIR}}/../../.." ABSOLUTE)
foreach(_fastio_file include/fastio/fastio.hpp lib/{real} lib/libfastio.a)
  if(NOT EXISTS "${{_fastio_prefix}}/${{_fastio_file}}")
    set(fastio_FOUND FALSE)
    set(fastio_NOT_FOUND_MESSAGE "${{_fastio_prefix}}/${{_fastio_file}} is missing: reinstall with cargo xtask install --prefix ${{_fastio_prefix}}")
    return()
  endif()
endforeach()
if(NOT TARGET fastio::fastio)
  add_library(fastio::fastio SHARED IMPORTED)
  set_target_properties(fastio::fastio PROPERTIES
    IMPORTED_LOCATION "${{_fastio_prefix}}/lib/{real}"
    IMPORTED_SONAME "{soname}"
    INTERFACE_INCLUDE_DIRECTORIES "${{_fastio_prefix}}/include/fastio")
  add_library(fastio::static STATIC IMPORTED)
  set_target_properties(fastio::static PROPERTIES
    IMPORTED_LOCATION "${{_fastio_prefix}}/lib/libfastio.a"
    IMPORTED_LINK_INTERFACE_LANGUAGES C
    INTERFACE_INCLUDE_DIRECTORIES "${{_fastio_prefix}}/include/fastio"
    INTERFACE_LINK_LIBRARIES "{libs}")
  add_library(fastio::cxx INTERFACE IMPORTED)
  set_target_properties(fastio::cxx PROPERTIES
    INTERFACE_LINK_LIBRARIES fastio::fastio
    INTERFACE_COMPILE_FEATURES cxx_std_17)
endif()
unset(_fastio_prefix)
unset(_fastio_file)
"#,
        major = major(),
        minor = version().split('.').nth(1).unwrap_or("0"),
        libs = NATIVE_STATIC_LIBS.join(";"),
    )
}

/// 0.x releases are compatible within a minor version, 1.x and later
/// within a major one (Cargo's rule); 64-bit only.
fn cmake_version() -> String {
    let version = version();
    format!(
        r#"# Written by `cargo xtask install`: fastio {version}.
set(PACKAGE_VERSION "{version}")
if(NOT CMAKE_SIZEOF_VOID_P EQUAL 8)
  set(PACKAGE_VERSION_UNSUITABLE TRUE)
elseif(PACKAGE_FIND_VERSION VERSION_GREATER PACKAGE_VERSION)
  set(PACKAGE_VERSION_COMPATIBLE FALSE)
elseif(NOT PACKAGE_FIND_VERSION_MAJOR STREQUAL "{major}")
  set(PACKAGE_VERSION_COMPATIBLE FALSE)
elseif("{major}" STREQUAL "0" AND NOT PACKAGE_FIND_VERSION_MINOR STREQUAL "{minor}")
  set(PACKAGE_VERSION_COMPATIBLE FALSE)
else()
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
  if(PACKAGE_FIND_VERSION STREQUAL PACKAGE_VERSION)
    set(PACKAGE_VERSION_EXACT TRUE)
  endif()
endif()
"#,
        major = major(),
        minor = version.split('.').nth(1).unwrap_or("0"),
    )
}

/// The `ci` step: install into `target/install-check-first`, move the
/// install to `target/install-check` (both packages must be relocatable),
/// consume it there from C (`pkg-config`) and C++ (`find_package`), and
/// run the C++ operators in the demos.
pub(crate) fn check() -> Result<(), String> {
    let target = root().join("target");
    let first = target.join("install-check-first");
    let prefix = target.join("install-check");
    for dir in [&first, &prefix] {
        let _ = std::fs::remove_dir_all(dir);
    }
    run(&first)?;
    std::fs::rename(&first, &prefix).map_err(|e| {
        format!(
            "move the install {} to {}: {e}",
            first.display(),
            prefix.display()
        )
    })?;
    let prefix = canonical(&prefix)?;
    let work = target.join("install-check-use");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).map_err(|e| format!("create {}: {e}", work.display()))?;
    let lib = prefix.join("lib");

    // The library names its soname, so programs find it by that name.
    let mut readelf = Command::new("readelf");
    readelf.arg("-d").arg(lib.join("libfastio.so"));
    let dynamic = Step::new("install: readelf -d libfastio.so", readelf).run()?;
    if !dynamic.contains(&format!("Library soname: [{}]", soname())) {
        return Err(format!(
            "libfastio.so has no soname {}:\n{dynamic}",
            soname()
        ));
    }

    // C, through pkg-config, as `cc app.c $(pkg-config --cflags --libs
    // fastio)`, at the install's new place: every path pkg-config gives
    // is in it (`fastio.pc` finds its prefix from its own place).
    let pkg_path = lib.join("pkgconfig");
    let flags = |args: &[&str]| -> Result<Vec<String>, String> {
        let mut pc = Command::new("pkg-config");
        pc.args(args).env("PKG_CONFIG_PATH", &pkg_path);
        let out = Step::new(format!("install: pkg-config {}", args.join(" ")), pc).run()?;
        Ok(out.split_whitespace().map(str::to_owned).collect())
    };
    let cflags = flags(&["--cflags", "fastio"])?;
    let libs = flags(&["--libs", "fastio"])?;
    let libdir = flags(&["--variable=libdir", "fastio"])?.join(" ");
    pkg_config_paths_are_in(&cflags, &libs, &libdir, &prefix, &first)?;
    let capi = root().join("crates").join("fastio-capi");
    let c_exe = work.join("contexts");
    let mut cc = Command::new("cc");
    // Beside pkg-config's flags only the test's own helper header
    // (`check.h`) and the run-time path, pkg-config's `libdir`.
    cc.args(["-std=c11", "-Wall", "-Wextra", "-Werror"])
        .args(&cflags)
        .arg("-I")
        .arg(capi.join("tests").join("c"))
        .arg(capi.join("tests").join("c").join("contexts.c"))
        .args(&libs)
        .arg(format!("-Wl,-rpath,{libdir}"))
        .arg("-o")
        .arg(&c_exe);
    Step::new("install: cc with pkg-config", cc).run()?;
    let mut ldd = Command::new("ldd");
    ldd.arg(&c_exe);
    let linked = Step::new("install: ldd", ldd).run()?;
    let want = lib.join(soname());
    let loaded = linked
        .lines()
        .find_map(|l| l.trim().strip_prefix(&format!("{} => ", soname())))
        .and_then(|rest| rest.split_whitespace().next())
        .map(|p| canonical(Path::new(p)));
    if loaded != Some(Ok(canonical(&want)?)) {
        return Err(format!(
            "the C program does not load {}:\n{linked}",
            want.display()
        ));
    }
    let mut c_run = Command::new(&c_exe);
    c_run.env("FASTIO_TEST", "1");
    let said = Step::new("install: run the C program", c_run).run()?;
    if !said.contains("contexts: ok") {
        return Err(format!("the C program said:\n{said}"));
    }

    // C++, through CMake's find_package, in a project of its own.
    let build = work.join("cmake-build");
    let mut configure = Command::new("cmake");
    configure
        .arg("-S")
        .arg(root().join("examples").join("cpp"))
        .arg("-B")
        .arg(&build)
        .arg(format!("-DCMAKE_PREFIX_PATH={}", prefix.display()))
        .arg("-DCMAKE_BUILD_TYPE=Release");
    Step::new("install: cmake configure examples/cpp", configure)
        .run()
        .map_err(|e| format!("{e} (CMake: apt-get install cmake)"))?;
    let mut make = Command::new("cmake");
    make.arg("--build").arg(&build).args(["--parallel", "2"]);
    Step::new("install: cmake --build examples/cpp", make).run()?;

    demos::volume(&build.join("crop"), &work)?;
    demos::stream(&build.join("gray"), &work)?;
    Ok(())
}

/// The README's demos with a C++ operator (built against the installed
/// prefix) in place of a Rust one: the outputs must be the same.
mod demos {
    use std::path::Path;
    use std::process::Command;

    use crate::root;
    use crate::step::Step;

    fn fastio() -> std::path::PathBuf {
        root().join("target").join("debug").join("fastio")
    }

    /// A copy of `examples/pipelines/<demo>` (its definition and the files
    /// beside it) in `dir`.
    fn copy_demo(demo: &str, dir: &Path) -> Result<(), String> {
        let src = root().join("examples").join("pipelines").join(demo);
        std::fs::create_dir_all(dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
        for entry in std::fs::read_dir(&src).map_err(|e| format!("{}: {e}", src.display()))? {
            let path = entry.map_err(|e| e.to_string())?.path();
            if path.is_file() {
                let to = dir.join(path.file_name().unwrap_or_default());
                std::fs::copy(&path, &to).map_err(|e| format!("copy {}: {e}", path.display()))?;
            }
        }
        Ok(())
    }

    /// Replaces operator `name`'s command (`[cargo, run, …, --bin, name]`)
    /// in `dir/pipeline.yaml` by `exe`.
    fn use_cpp_operator(dir: &Path, name: &str, exe: &Path) -> Result<(), String> {
        let file = dir.join("pipeline.yaml");
        let yaml =
            std::fs::read_to_string(&file).map_err(|e| format!("read {}: {e}", file.display()))?;
        let rust = format!("--bin, {name}]");
        let mut replaced = 0;
        let text: Vec<String> = yaml
            .lines()
            .map(|l| {
                if l.trim_start().starts_with("command:") && l.trim_end().ends_with(&rust) {
                    replaced += 1;
                    let indent = &l[..l.len() - l.trim_start().len()];
                    format!("{indent}command: [{}]", exe.display())
                } else {
                    l.to_owned()
                }
            })
            .collect();
        if replaced != 1 {
            return Err(format!(
                "{} has {replaced} commands of `{name}`, not one",
                file.display()
            ));
        }
        std::fs::write(&file, text.join("\n") + "\n")
            .map_err(|e| format!("write {}: {e}", file.display()))
    }

    /// The `cargo run ... -p fastio-cli -- ARGS` command of the pipeline
    /// in `dir` as `<the check's fastio> ARGS`.
    fn use_built_fastio(dir: &Path) -> Result<(), String> {
        let file = dir.join("pipeline.yaml");
        let yaml =
            std::fs::read_to_string(&file).map_err(|e| format!("read {}: {e}", file.display()))?;
        let cargo_run = "[cargo, run, --profile, \"${{ profile }}\", -q, -p, fastio-cli, --,";
        if yaml.matches(cargo_run).count() != 1 {
            return Err(format!(
                "{} has no one command `{cargo_run} ...]`",
                file.display()
            ));
        }
        // Quoted (YAML's double quotes take Rust's escapes of a path).
        let built = format!("[{:?},", fastio().display().to_string());
        std::fs::write(&file, yaml.replace(cargo_run, &built))
            .map_err(|e| format!("write {}: {e}", file.display()))
    }

    fn run(label: &str, dir: &Path, args: &[&str]) -> Result<String, String> {
        let mut cmd = Command::new(fastio());
        // The streaming demo's display: the numbers of every frame.
        cmd.env("EVERY", "1")
            .arg("run")
            .arg(dir.join("pipeline.yaml"))
            .args(["--param", "profile=dev"])
            .args(args)
            .current_dir(root());
        Step::new(label, cmd).run()
    }

    /// The operator's own lines (`[name] …`) of a run's output.
    fn lines_of(log: &str, name: &str) -> Vec<String> {
        let tag = format!("[{name}] ");
        log.lines()
            .filter_map(|l| l.find(&tag).map(|at| l[at + tag.len()..].to_owned()))
            .collect()
    }

    /// The volume demo with `crop` in C++: the same crop line, the same PNG
    /// out of `render` and the same statistics out of `stats` as with
    /// Rust's.
    pub(super) fn volume(crop: &Path, work: &Path) -> Result<(), String> {
        let (rust_dir, cpp_dir) = (work.join("volume-rust"), work.join("volume-cpp"));
        copy_demo("volume", &rust_dir)?;
        copy_demo("volume", &cpp_dir)?;
        use_cpp_operator(&cpp_dir, "crop", crop)?;
        let (rust_out, cpp_out) = (work.join("volume-rust-out"), work.join("volume-cpp-out"));
        let rust_log = run(
            "install: volume demo (Rust crop)",
            &rust_dir,
            &["--output", &rust_out.display().to_string()],
        )?;
        let cpp_log = run(
            "install: volume demo (C++ crop)",
            &cpp_dir,
            &["--output", &cpp_out.display().to_string()],
        )?;
        let (rust_crop, cpp_crop) = (lines_of(&rust_log, "crop"), lines_of(&cpp_log, "crop"));
        if rust_crop.is_empty() || rust_crop != cpp_crop {
            return Err(format!(
                "the C++ crop said {cpp_crop:?}, Rust's {rust_crop:?}"
            ));
        }
        // The statistics are a result of the run, printed at its end.
        let summary = |log: &str| -> Vec<String> {
            log.lines()
                .filter(|l| l.starts_with("stats/summary: "))
                .map(str::to_owned)
                .collect()
        };
        let (rust_stats, cpp_stats) = (summary(&rust_log), summary(&cpp_log));
        if rust_stats.len() != 1 || rust_stats != cpp_stats {
            return Err(format!(
                "the statistics with the C++ crop are {cpp_stats:?}, with Rust's {rust_stats:?}"
            ));
        }
        let files = |dir: &Path| -> Result<Vec<(String, Vec<u8>)>, String> {
            let mut out = Vec::new();
            for sub in ["render"] {
                let d = dir.join(sub);
                let mut names: Vec<_> = std::fs::read_dir(&d)
                    .map_err(|e| format!("{}: {e}", d.display()))?
                    .flatten()
                    .map(|e| e.path())
                    .collect();
                names.sort();
                for p in names {
                    let bytes = read_tree(&p)?;
                    out.push((
                        p.strip_prefix(dir).unwrap_or(&p).display().to_string(),
                        bytes,
                    ));
                }
            }
            Ok(out)
        };
        let (rust_files, cpp_files) = (files(&rust_out)?, files(&cpp_out)?);
        if rust_files.is_empty() || rust_files != cpp_files {
            let names = |f: &[(String, Vec<u8>)]| {
                f.iter()
                    .map(|(n, b)| format!("{n} ({} bytes)", b.len()))
                    .collect::<Vec<_>>()
            };
            return Err(format!(
                "the volume demo's outputs differ with the C++ crop: {:?} vs Rust's {:?}",
                names(&cpp_files),
                names(&rust_files)
            ));
        }
        println!(
            "install: the C++ crop reproduced the volume demo ({} output files, {})",
            cpp_files.len(),
            cpp_crop.join("; ")
        );
        Ok(())
    }

    /// A file's bytes, or a directory's files' bytes in name order.
    fn read_tree(p: &Path) -> Result<Vec<u8>, String> {
        if p.is_dir() {
            let mut names: Vec<_> = std::fs::read_dir(p)
                .map_err(|e| format!("{}: {e}", p.display()))?
                .flatten()
                .map(|e| e.path())
                .collect();
            names.sort();
            let mut all = Vec::new();
            for n in names {
                all.extend(n.file_name().unwrap_or_default().as_encoded_bytes());
                all.extend(read_tree(&n)?);
            }
            Ok(all)
        } else {
            std::fs::read(p).map_err(|e| format!("read {}: {e}", p.display()))
        }
    }

    /// The streaming demo with `gray` in C++ (its Python stage from
    /// `target/venv-python`): every frame through, and the display's
    /// numbers of each sampled frame the same as with Rust's `gray`.
    pub(super) fn stream(gray: &Path, work: &Path) -> Result<(), String> {
        const FRAMES: u32 = 120;
        let python = root()
            .join("target")
            .join("venv-python")
            .join("bin")
            .join("python");
        let python = format!("python={}", python.display());
        let frames = FRAMES.to_string();
        let (rust_dir, cpp_dir) = (work.join("stream-rust"), work.join("stream-cpp"));
        copy_demo("stream", &rust_dir)?;
        copy_demo("stream", &cpp_dir)?;
        use_cpp_operator(&cpp_dir, "gray", gray)?;
        let args = ["--param", python.as_str(), "--frames", frames.as_str()];
        // README's recording of the demo, replayed below.
        let recording = rust_dir.join("demo.mcap");
        let record = recording.display().to_string();
        let rust_log = run(
            "install: streaming demo (Rust gray), recorded",
            &rust_dir,
            &[&args[..], &["--record", record.as_str()]].concat(),
        )?;
        let cpp_log = run("install: streaming demo (C++ gray)", &cpp_dir, &args)?;
        let said = format!("gray: {FRAMES} frames");
        if !lines_of(&cpp_log, "gray").contains(&said) {
            return Err(format!("the C++ gray did not say {said:?}:\n{cpp_log}"));
        }
        // `frame N: mean edge X, strongest at (Y, X), T ms after the camera`:
        // all but the time.
        let numbers = |log: &str| -> Vec<String> {
            lines_of(log, "display")
                .into_iter()
                .map(|l| l.split(", ").take(3).collect::<Vec<_>>().join(", "))
                .collect()
        };
        let (rust_numbers, cpp_numbers) = (numbers(&rust_log), numbers(&cpp_log));
        let last = format!("display: {FRAMES} frames");
        if !cpp_numbers.contains(&last) || rust_numbers != cpp_numbers {
            return Err(format!(
                "the display saw {cpp_numbers:?} with the C++ gray, {rust_numbers:?} with Rust's"
            ));
        }
        println!(
            "install: the C++ gray reproduced the streaming demo ({FRAMES} frames, {} sampled)",
            cpp_numbers.len() - 1
        );
        // README's replay: the recorded camera into the same stages, at the
        // recorded pace; the display must see the same numbers.
        let replayed = format!("recording={record}");
        let replay_dir = work.join("stream-replay");
        copy_demo("stream", &replay_dir)?;
        std::fs::rename(
            replay_dir.join("replay.yaml"),
            replay_dir.join("pipeline.yaml"),
        )
        .map_err(|e| format!("replay.yaml: {e}"))?;
        // Its `cargo run --profile release -p fastio-cli -- replay ...`
        // would build the CLI in release (two minutes of a fresh clone's
        // CI) to run the code the check's own `fastio` already is.
        use_built_fastio(&replay_dir)?;
        let replay_log = run(
            "install: streaming demo replayed (replay.yaml)",
            &replay_dir,
            &["--param", python.as_str(), "--param", replayed.as_str()],
        )?;
        let replay_numbers = numbers(&replay_log);
        if replay_numbers != rust_numbers {
            return Err(format!(
                "the display saw {replay_numbers:?} replayed, {rust_numbers:?} live"
            ));
        }
        println!(
            "install: the replayed streaming demo showed every frame as the live one ({FRAMES} frames)"
        );
        Ok(())
    }
}
