// Test helpers for the C++ API tests: EXPECT_THROW(E, status, call, text)
// passes when `call` throws exactly E (not a subclass of it, and not
// another fastio exception) with `status` and `text` in its message.
#pragma once
#include <fastio.hpp>

#include <cstdio>
#include <string>
#include <typeinfo>

static int failures = 0;

#define FAIL(...)                                                                         \
    do {                                                                                  \
        std::fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                              \
        std::fprintf(stderr, __VA_ARGS__);                                                \
        std::fprintf(stderr, "\n");                                                       \
        ++failures;                                                                       \
    } while (0)

#define TRUE(cond)                                                                        \
    do {                                                                                  \
        if (!(cond)) FAIL("not true: %s", #cond);                                         \
    } while (0)

#define EXPECT_THROW(E, code, call, text)                                                 \
    do {                                                                                  \
        try {                                                                             \
            (void)(call);                                                                 \
            FAIL("%s did not throw", #call);                                              \
        } catch (const fastio::error &e_) {                                               \
            if (typeid(e_) != typeid(E))                                                  \
                FAIL("%s threw %s, not %s: %s", #call, typeid(e_).name(), #E, e_.what()); \
            else if (e_.status() != (code))                                               \
                FAIL("%s: status %d, not %d: %s", #call, e_.status(), (code), e_.what()); \
            else if (std::string(e_.what()).find(text) == std::string::npos)              \
                FAIL("%s: \"%s\" does not say \"%s\"", #call, e_.what(), text);           \
        }                                                                                 \
    } while (0)
