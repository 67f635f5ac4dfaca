// README's operator in C++: reads input `v` (float32, read-only, zero
// copy) and writes `w = 2 * v` to its dynamic output `w` (shape [-1]).
#include <fastio.hpp>

#include <iostream>

int main() try {
    auto op = fastio::op::from_env();
    auto v = op.input("v").map<float>();  // const float, the input's own memory
    auto w = op.output("w");
    w.update_shape({{0, static_cast<int>(v.size())}});
    w.allocate();
    auto out = w.map_mut<float>();
    for (std::size_t i = 0; i < v.size(); ++i) out[i] = 2 * v[i];
    std::cout << "scaled " << v.size() << " values" << std::endl;
    return 0;
} catch (const std::exception &e) {
    std::cerr << "scale: " << e.what() << std::endl;
    return 1;
}
