// DataRandom: the small, portable random generator the data side uses for
// splits, shuffles, synthetic sets and augmentation. The standard library's
// distributions differ between implementations; these give the same numbers
// everywhere, so a seed names the same data on every machine.
#pragma once

#include <cmath>
#include <cstdint>

namespace strata::data {

// SplitMix64 step: advances the state and returns the next 64 random bits.
inline uint64_t nextRandom(uint64_t& state) {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// A seed for a stream derived from several values (seed, epoch, batch...).
inline uint64_t mixSeed(uint64_t a, uint64_t b) {
    uint64_t s = a ^ (b + 0x9E3779B97F4A7C15ull + (a << 6) + (a >> 2));
    return nextRandom(s);
}

// Uniform in [0, n) (n > 0); the tiny modulo bias does not matter here.
inline uint64_t randomBelow(uint64_t& state, uint64_t n) { return nextRandom(state) % n; }

// Uniform in [0, 1).
inline double randomUnit(uint64_t& state) { return static_cast<double>(nextRandom(state) >> 11) * 0x1.0p-53; }

// Standard normal (Box-Muller; one value per call keeps the stream simple).
inline double randomNormal(uint64_t& state) {
    double u1 = randomUnit(state);
    double u2 = randomUnit(state);
    if (u1 < 1e-300) u1 = 1e-300;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

}  // namespace strata::data
