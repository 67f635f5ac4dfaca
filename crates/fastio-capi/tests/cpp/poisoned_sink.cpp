// A C++ sink after a source that fails: `op.frames()` throws
// fastio::poisoned once the frames before the failure are read; the sink
// says so (type and message) and exits 1.
#include <fastio.hpp>

#include <iostream>

int main() {
    auto op = fastio::op::from_env();
    std::uint64_t n = 0;
    try {
        for (auto &frame : op.frames()) {
            (void)frame.input<std::uint32_t>("v");
            ++n;
        }
    } catch (const fastio::poisoned &e) {
        std::cout << "c++ sink: fastio::poisoned after " << n << " frames (status " << e.status()
                  << "): " << e.what() << std::endl;
        return 1;
    }
    std::cout << "c++ sink: the stream ended after " << n << " frames" << std::endl;
    return 0;
}
