//! `fastio top`: every live context of this user on the machine, and for
//! the selected one its operators, streams and allocations, refreshed
//! every second. It only observes (`fastio::observe`: read-only mapping,
//! no participation, no lock, no write), so watching cannot change what
//! it watches; a context that is corrupt or vanishes shows as such.
//!
//! Keys: `q` quits, `↑`/`↓` (or `k`/`j`) select a context, `s` cycles the
//! allocations' order (size, name, holders). `--once` prints one screen
//! as text instead (for scripts).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use clap::Args;
use fastio::observe::{AllocState, Observer, Snapshot};
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Table, TableState};

use crate::Failure;
use crate::contexts::discover;

#[derive(Args)]
pub(crate) struct TopArgs {
    /// Print one screen as text and exit.
    #[arg(long)]
    once: bool,
    /// Seconds between refreshes.
    #[arg(long, value_name = "SECS", default_value_t = 1.0)]
    interval: f64,
}

/// One context as last seen.
struct Seen {
    label: String,
    snapshot: Result<Snapshot, String>,
    /// Frames out per entry at the previous refresh, for rates.
    frames: BTreeMap<String, (u64, Instant)>,
    rates: BTreeMap<String, f64>,
}

/// Everything on screen.
struct State {
    contexts: Vec<Seen>,
    selected: usize,
    sort: usize,
}

const SORTS: [&str; 3] = ["size", "name", "holders"];

impl State {
    fn refresh(&mut self) {
        let mut next = Vec::new();
        for f in discover() {
            let snapshot = Observer::open(&f.target)
                .and_then(|o| o.snapshot())
                .map_err(|e| e.to_string());
            let old = self.contexts.iter().find(|c| c.label == f.label);
            let mut frames = old.map(|c| c.frames.clone()).unwrap_or_default();
            let mut rates = BTreeMap::new();
            if let Ok(s) = &snapshot {
                for (entry, out) in frames_out(s) {
                    let now = Instant::now();
                    if let Some((prev, t)) = frames.get(&entry) {
                        let secs = now.duration_since(*t).as_secs_f64().max(1e-3);
                        rates.insert(entry.clone(), out.saturating_sub(*prev) as f64 / secs);
                    }
                    frames.insert(entry, (out, now));
                }
            }
            next.push(Seen {
                label: f.label,
                snapshot,
                frames,
                rates,
            });
        }
        // Pipeline runs first, then the others by name; the selection
        // follows its context across refreshes.
        next.sort_by_key(|c| {
            (
                c.snapshot.as_ref().map_or(true, |s| s.plan.is_none()),
                c.label.clone(),
            )
        });
        let was = self.contexts.get(self.selected).map(|c| c.label.clone());
        self.contexts = next;
        self.selected = was
            .and_then(|l| self.contexts.iter().position(|c| c.label == l))
            .unwrap_or(0);
    }
}

/// Frames published per entry, from the producers' statistics.
fn frames_out(s: &Snapshot) -> Vec<(String, u64)> {
    let Some(plan) = &s.plan else {
        return Vec::new();
    };
    plan.entries
        .iter()
        .filter_map(|e| {
            let op = &plan.operators.get(e.producer)?.name;
            let st = stats_of(s, op)?;
            let k = plan.operators[e.producer]
                .outputs
                .iter()
                .position(|(_, x)| plan.entries.get(*x).is_some_and(|y| y.key == e.key))?;
            Some((e.name.clone(), *st.frames_out.get(k)?))
        })
        .collect()
}

fn stats_of<'a>(s: &'a Snapshot, op: &str) -> Option<&'a fastio::OperatorStats> {
    s.operator_stats
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(op))
        .map(|(_, st)| st)
}

fn human(b: u64) -> String {
    fastio::human_bytes(b)
}

/// The process of each operator: attached processes whose environment
/// names it (`FASTIO_OPERATOR`).
pub(crate) fn operator_pids(s: &Snapshot) -> BTreeMap<String, (u32, bool)> {
    let mut out = BTreeMap::new();
    for &(pid, alive) in &s.context.processes {
        let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        for var in env.split(|&b| b == 0) {
            if let Some(name) = var.strip_prefix(fastio::OPERATOR_ENV.as_bytes())
                && let Some(name) = name.strip_prefix(b"=")
            {
                out.insert(String::from_utf8_lossy(name).to_lowercase(), (pid, alive));
            }
        }
    }
    out
}

/// CPU seconds and resident bytes of `pid`.
fn usage(pid: u32) -> Option<(f64, u64)> {
    let (cpu, rss) = fastio_pipeline::snapshot::process_usage(i32::try_from(pid).ok()?)?;
    Some((cpu.as_secs_f64(), rss))
}

/// The contexts table's rows.
fn context_rows(state: &State) -> Vec<Vec<String>> {
    state
        .contexts
        .iter()
        .map(|c| match &c.snapshot {
            Ok(s) => {
                let ctx = &s.context;
                let mut status = Vec::new();
                if ctx.closed {
                    status.push("closed".to_owned());
                }
                if !ctx.creator_alive {
                    status.push("owner dead".to_owned());
                }
                if ctx.participants.1 > 0 {
                    status.push(format!("{} dead not reaped", ctx.participants.1));
                }
                if !s.poisoned.is_empty() {
                    status.push(format!("{} poisoned", s.poisoned.len()));
                }
                vec![
                    c.label.clone(),
                    format!(
                        "{}{}",
                        ctx.creator_pid,
                        if ctx.creator_alive { "" } else { " (dead)" }
                    ),
                    human(ctx.stats.capacity),
                    human(ctx.stats.used_bytes),
                    human(ctx.stats.cached_bytes),
                    ctx.stats.live_allocations.to_string(),
                    format!("{}/{}", ctx.participants.0, ctx.participants.1),
                    if status.is_empty() {
                        "ok".to_owned()
                    } else {
                        status.join(", ")
                    },
                ]
            }
            Err(e) => vec![
                c.label.clone(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                format!("unreadable: {e}"),
            ],
        })
        .collect()
}

const CONTEXT_HEADER: [&str; 8] = [
    "context",
    "owner",
    "size",
    "used",
    "cached",
    "allocs",
    "alive/dead",
    "state",
];
const OPERATOR_HEADER: [&str; 8] = [
    "operator",
    "process",
    "cpu s",
    "rss",
    "frames in",
    "frames out",
    "drops",
    "p50/p99 per frame",
];
const STREAM_HEADER: [&str; 5] = ["stream", "depth", "fill", "rate", "consumers"];
const ALLOC_HEADER: [&str; 7] = [
    "allocation",
    "size",
    "type and shape",
    "holders",
    "writer",
    "age",
    "state",
];

/// The selected context's operators (of a pipeline run in it).
fn operator_rows(s: &Snapshot) -> Vec<Vec<String>> {
    let Some(plan) = &s.plan else {
        return Vec::new();
    };
    let pids = operator_pids(s);
    plan.operators
        .iter()
        .map(|o| {
            let (pid, cpu, rss) = match pids.get(&o.name.to_lowercase()) {
                Some(&(pid, alive)) => {
                    let (cpu, rss) = usage(pid).unwrap_or_default();
                    (
                        format!("{pid} {}", if alive { "running" } else { "DEAD" }),
                        format!("{cpu:.2}"),
                        human(rss),
                    )
                }
                // Not attached: not started yet, or done and gone.
                None => ("not attached".into(), "-".into(), "-".into()),
            };
            let st = stats_of(s, &o.name);
            let list = |v: Option<&Vec<u64>>| {
                v.map_or("-".to_owned(), |v| {
                    v.iter().map(u64::to_string).collect::<Vec<_>>().join(",")
                })
            };
            vec![
                o.name.clone(),
                pid,
                cpu,
                rss,
                list(st.map(|s| &s.frames_in)),
                list(st.map(|s| &s.frames_out)),
                list(st.map(|s| &s.dropped)),
                st.map_or("-".into(), |s| {
                    format!(
                        "{:.2}/{:.2} ms",
                        s.step_ns[0] as f64 / 1e6,
                        s.step_ns[1] as f64 / 1e6
                    )
                }),
            ]
        })
        .collect()
}

/// The selected context's streams: depth, fill (published minus the
/// slowest consumer's received) and rate.
fn stream_rows(seen: &Seen, s: &Snapshot) -> Vec<Vec<String>> {
    let Some(plan) = &s.plan else {
        return Vec::new();
    };
    let Some(st) = &plan.streaming else {
        return Vec::new();
    };
    let out: BTreeMap<String, u64> = frames_out(s).into_iter().collect();
    plan.entries
        .iter()
        .enumerate()
        .map(|(e, entry)| {
            let received: Vec<u64> = entry
                .consumers
                .iter()
                .filter_map(|&c| {
                    let op = plan.operators.get(c)?;
                    let k = op.inputs.iter().position(|(_, x)| *x == e)?;
                    stats_of(s, &op.name)?.frames_in.get(k).copied()
                })
                .collect();
            let fill = match (out.get(&entry.name), received.iter().min()) {
                (Some(&o), Some(&r)) => o.saturating_sub(r).min(u64::from(st.depth)).to_string(),
                _ => "-".into(),
            };
            vec![
                entry.name.clone(),
                st.depth.to_string(),
                fill,
                seen.rates
                    .get(&entry.name)
                    .map_or("-".into(), |r| format!("{r:.0} fps")),
                entry
                    .consumers
                    .iter()
                    .filter_map(|&c| plan.operators.get(c).map(|o| o.name.clone()))
                    .collect::<Vec<_>>()
                    .join(", "),
            ]
        })
        .collect()
}

/// The selected context's allocations, in the chosen order.
fn alloc_rows(s: &Snapshot, sort: usize) -> Vec<Vec<String>> {
    let mut allocs: Vec<_> = s.allocations.iter().collect();
    match SORTS[sort % SORTS.len()] {
        "size" => allocs.sort_by_key(|a| std::cmp::Reverse(a.size)),
        "name" => allocs.sort_by(|a, b| {
            let n = |x: &fastio::observe::AllocInfo| x.names.first().map(|n| n.name.clone());
            n(a).cmp(&n(b))
        }),
        _ => allocs.sort_by_key(|a| std::cmp::Reverse(a.holders.len())),
    }
    allocs
        .into_iter()
        .map(|a| {
            let names = if a.names.is_empty() {
                "(anonymous)".to_owned()
            } else {
                a.names
                    .iter()
                    .map(|n| n.name.clone())
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let ty = a.names.first().map_or("-".to_owned(), |n| {
                format!(
                    "{} [{}]",
                    n.type_text,
                    n.dims
                        .iter()
                        .map(u64::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            });
            let holders = a
                .holders
                .iter()
                .map(|h| {
                    format!(
                        "{}×{}{}{}",
                        h.pid,
                        h.holds,
                        if h.read_maps > 0 {
                            format!(" r{}", h.read_maps)
                        } else {
                            String::new()
                        },
                        if h.alive { "" } else { " DEAD" }
                    )
                })
                .collect::<Vec<_>>()
                .join(" ");
            let writer = match a.writer {
                Some((slot, alive)) => format!("slot {slot}{}", if alive { "" } else { " DEAD" }),
                None => "-".into(),
            };
            let poisoned = a
                .names
                .iter()
                .any(|n| n.name.starts_with(fastio::plan::POISON_PREFIX));
            let state = match a.state {
                AllocState::Creating => "creating",
                AllocState::Doomed => "freed, held",
                AllocState::Active if poisoned => "poison marker",
                AllocState::Active if a.names.is_empty() => "private",
                AllocState::Active => "published",
            };
            let age = a.created_unix_ms.map_or("-".to_owned(), |ms| {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as u64);
                format!("{:.1} s", now.saturating_sub(ms) as f64 / 1000.0)
            });
            vec![
                names,
                human(a.size),
                ty,
                holders,
                writer,
                age,
                state.to_owned(),
            ]
        })
        .collect()
}

/// Plain text of every context (`--once`).
fn text(state: &State) -> String {
    fn table(out: &mut String, header: &[&str], rows: &[Vec<String>]) {
        let mut w: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
        for r in rows {
            for (k, c) in r.iter().enumerate() {
                w[k] = w[k].max(c.chars().count());
            }
        }
        let line = |cells: Vec<String>| {
            cells
                .iter()
                .enumerate()
                .map(|(k, c)| format!("{c:<width$}", width = w[k]))
                .collect::<Vec<_>>()
                .join("  ")
                .trim_end()
                .to_owned()
        };
        out.push_str(&line(header.iter().map(|h| (*h).to_owned()).collect()));
        out.push('\n');
        for r in rows {
            out.push_str(&line(r.clone()));
            out.push('\n');
        }
    }
    let mut out = format!("fastio top: {} contexts\n", state.contexts.len());
    table(&mut out, &CONTEXT_HEADER, &context_rows(state));
    for seen in &state.contexts {
        let Ok(s) = &seen.snapshot else { continue };
        out.push_str(&format!("\n{}\n", seen.label));
        if s.plan.is_some() {
            table(&mut out, &OPERATOR_HEADER, &operator_rows(s));
            let streams = stream_rows(seen, s);
            if !streams.is_empty() {
                table(&mut out, &STREAM_HEADER, &streams);
            }
        }
        table(&mut out, &ALLOC_HEADER, &alloc_rows(s, state.sort));
    }
    out
}

fn tui_table<'a>(title: String, header: &'a [&'a str], rows: Vec<Vec<String>>) -> Table<'a> {
    let widths: Vec<Constraint> = header.iter().map(|_| Constraint::Fill(1)).collect();
    Table::new(
        rows.into_iter()
            .map(|r| Row::new(r.into_iter().map(Cell::from))),
        widths,
    )
    .header(
        Row::new(header.iter().map(|h| Cell::from(*h)))
            .style(Style::default().add_modifier(Modifier::BOLD)),
    )
    .block(Block::default().borders(Borders::ALL).title(title))
    .row_highlight_style(Style::default().bg(Color::Blue).fg(Color::White))
}

fn draw(frame: &mut ratatui::Frame<'_>, state: &State) {
    let seen = state.contexts.get(state.selected);
    let snap = seen.and_then(|s| s.snapshot.as_ref().ok());
    let has_plan = snap.is_some_and(|s| s.plan.is_some());
    let n_ctx = state.contexts.len().max(1) as u16 + 3;
    let areas = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(n_ctx.min(12)),
        Constraint::Length(if has_plan { 8 } else { 0 }),
        Constraint::Length(if has_plan { 6 } else { 0 }),
        Constraint::Fill(1),
    ])
    .split(frame.area());
    frame.render_widget(
        Paragraph::new(Line::from(format!(
            "fastio top — {} contexts — q quit, ↑/↓ select, s sort allocations by {}",
            state.contexts.len(),
            SORTS[state.sort % SORTS.len()]
        ))),
        areas[0],
    );
    let mut ts = TableState::default();
    ts.select(Some(state.selected));
    frame.render_stateful_widget(
        tui_table("contexts".into(), &CONTEXT_HEADER, context_rows(state)),
        areas[1],
        &mut ts,
    );
    let (Some(seen), Some(s)) = (seen, snap) else {
        return;
    };
    if has_plan {
        frame.render_widget(
            tui_table(
                format!("operators of {}", seen.label),
                &OPERATOR_HEADER,
                operator_rows(s),
            ),
            areas[2],
        );
        frame.render_widget(
            tui_table("streams".into(), &STREAM_HEADER, stream_rows(seen, s)),
            areas[3],
        );
    }
    frame.render_widget(
        tui_table(
            format!(
                "allocations of {} ({} changing, left out)",
                seen.label, s.unsettled
            ),
            &ALLOC_HEADER,
            alloc_rows(s, state.sort),
        ),
        areas[4],
    );
}

pub(crate) fn run(args: TopArgs) -> Result<(), Failure> {
    let mut state = State {
        contexts: Vec::new(),
        selected: 0,
        sort: 0,
    };
    state.refresh();
    if args.once {
        print!("{}", text(&state));
        return Ok(());
    }
    let interval = Duration::try_from_secs_f64(args.interval)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| Failure {
            message: format!(
                "--interval {}: expected a positive number of seconds",
                args.interval
            ),
            code: 2,
        })?;
    let mut terminal = ratatui::try_init().map_err(|e| Failure {
        message: format!("top needs a terminal: {e}"),
        code: 1,
    })?;
    let result = (|| -> std::io::Result<()> {
        let mut last = Instant::now();
        loop {
            terminal.draw(|f| draw(f, &state))?;
            let wait = interval.saturating_sub(last.elapsed());
            if event::poll(wait)?
                && let Event::Key(k) = event::read()?
                && k.kind == KeyEventKind::Press
            {
                match k.code {
                    KeyCode::Char('q') | KeyCode::Esc => return Ok(()),
                    KeyCode::Down | KeyCode::Char('j') => {
                        state.selected =
                            (state.selected + 1).min(state.contexts.len().saturating_sub(1));
                    }
                    KeyCode::Up | KeyCode::Char('k') => {
                        state.selected = state.selected.saturating_sub(1);
                    }
                    KeyCode::Char('s') => state.sort += 1,
                    _ => {}
                }
            }
            if last.elapsed() >= interval {
                state.refresh();
                last = Instant::now();
            }
        }
    })();
    ratatui::restore();
    result.map_err(|e| Failure {
        message: format!("top: {e}"),
        code: 1,
    })
}
