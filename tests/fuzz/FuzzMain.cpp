// One libFuzzer executable per target (STRATA_FUZZ_TARGET, set by tests/fuzz/CMakeLists.txt).
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/FuzzEntries.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const strata::fuzz::Target* target = strata::fuzz::findTarget(STRATA_FUZZ_TARGET);
    if (target) target->run(data, size);
    return 0;
}
