// A streaming C++ operator between Rust ones: every frame of `v` (uint32),
// one stage further (every word + 1, fio-streamop's rule), into `w`, with
// the frame's shape. `for (auto &frame : op.frames())`. With THROW_AT=k
// it throws at frame k after writing half of its output: the frame is
// abandoned as the exception leaves the loop, so that half is never
// published.
#include <fastio.hpp>

#include <cstdint>
#include <cstdlib>
#include <iostream>

int main() try {
    auto op = fastio::op::from_env();
    const char *throw_at = std::getenv("THROW_AT");
    const std::uint64_t fail = throw_at ? std::strtoull(throw_at, nullptr, 10) : UINT64_MAX;
    std::uint64_t n = 0;
    for (auto &frame : op.frames()) {
        if (frame.seq() != n) throw std::runtime_error("frame " + std::to_string(frame.seq()) + " out of order");
        auto v = frame.input<std::uint32_t>("v");
        auto w = frame.output<std::uint32_t>("w", v.shape());
        if (w.size() != v.size()) throw std::runtime_error("output slot of another size");
        if (n == fail) {
            for (std::size_t i = 0; i < v.size() / 2; ++i) w[i] = v[i] + 1;
            throw std::runtime_error("failing at frame " + std::to_string(n) + " on purpose");
        }
        for (std::size_t i = 0; i < v.size(); ++i) w[i] = v[i] + 1;
        ++n;
    }
    std::cout << "c++ stage: " << n << " frames" << std::endl;
    return 0;
} catch (const std::exception &e) {
    std::cerr << "c++ stage: " << e.what() << std::endl;
    return 1;
}
