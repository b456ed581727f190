#pragma once
// 16-bit floating-point storage types for gradients on the wire: IEEE half precision and
// bfloat16. Arithmetic goes through float and rounds back (round to nearest even), the
// same on the host and, through STRATA_HOST_DEVICE, on a GPU.
#include <bit>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "strata/config.hpp"

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#endif

namespace strata {

namespace detail {

STRATA_HOST_DEVICE std::uint16_t float_to_half_bits_portable(float value) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(value);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t exponent = (x >> 23) & 0xffu;
  std::uint32_t mantissa = x & 0x7fffffu;
  if (exponent == 0xffu) return static_cast<std::uint16_t>(sign | 0x7c00u | (mantissa ? 0x200u : 0u));  // Inf, NaN
  const int e = static_cast<int>(exponent) - 127 + 15;
  if (e >= 31) return static_cast<std::uint16_t>(sign | 0x7c00u);  // overflow to infinity
  if (e <= 0) {                                                   // subnormal half, or zero
    if (e < -10) return static_cast<std::uint16_t>(sign);
    mantissa |= 0x800000u;
    const int shift = 14 - e;
    const std::uint32_t half_mantissa = mantissa >> shift;
    const std::uint32_t rest = mantissa & ((1u << shift) - 1u), halfway = 1u << (shift - 1);
    const std::uint32_t round_up = rest > halfway || (rest == halfway && (half_mantissa & 1u));
    return static_cast<std::uint16_t>(sign | (half_mantissa + round_up));
  }
  const std::uint32_t bits = sign | (static_cast<std::uint32_t>(e) << 10) | (mantissa >> 13);
  const std::uint32_t rest = mantissa & 0x1fffu;
  const std::uint32_t round_up = rest > 0x1000u || (rest == 0x1000u && (bits & 1u));
  return static_cast<std::uint16_t>(bits + round_up);  // a carry into the exponent is correct rounding
}

STRATA_HOST_DEVICE float half_bits_to_float_portable(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu;
  std::uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1fu) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  if (exponent != 0) return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  if (mantissa == 0) return std::bit_cast<float>(sign);
  int e = -1;  // normalize a subnormal half
  do {
    ++e;
    mantissa <<= 1;
  } while (!(mantissa & 0x400u));
  return std::bit_cast<float>(sign | (static_cast<std::uint32_t>(112 - e) << 23) | ((mantissa & 0x3ffu) << 13));
}

// On a host compiler with _Float16 the compiler's own conversions are used: they round
// exactly as the portable code above (the tests compare the two bit for bit) and become
// single vector instructions where the target has them (x86 F16C).
// On a GPU the conversion instructions (cvt.rn) do the same, one instruction per value
// where the portable code takes twenty: that decides whether a cast kernel is bound by
// memory or by integer arithmetic. (The GPU test compares them; NaN payloads may differ.)
#if defined(__FLT16_MAX__) && !defined(__CUDA_ARCH__)
inline std::uint16_t float_to_half_bits(float value) { return std::bit_cast<std::uint16_t>(static_cast<_Float16>(value)); }
inline float half_bits_to_float(std::uint16_t h) { return static_cast<float>(std::bit_cast<_Float16>(h)); }
#elif defined(__CUDA_ARCH__)
__device__ inline std::uint16_t float_to_half_bits(float value) { return __half_as_ushort(__float2half_rn(value)); }
__device__ inline float half_bits_to_float(std::uint16_t h) { return __half2float(__ushort_as_half(h)); }
#else
STRATA_HOST_DEVICE std::uint16_t float_to_half_bits(float value) { return float_to_half_bits_portable(value); }
STRATA_HOST_DEVICE float half_bits_to_float(std::uint16_t h) { return half_bits_to_float_portable(h); }
#endif

/// The bfloat16 nearest to the float whose bits are `x` (ties to even), in the low 16 bits;
/// a NaN, where `nan` is all ones, stays a quiet NaN. Bits is one std::uint32_t or a
/// register of them (numeric/lanes.hpp), so that one formula serves both.
template <class Bits>
STRATA_HOST_DEVICE Bits bfloat16_rounding(Bits x, Bits nan) {
  const Bits quiet = (x >> 16) | 0x40u, rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  return (quiet & nan) | (rounded & ~nan);
}

STRATA_HOST_DEVICE std::uint16_t float_to_bfloat16_bits(float value) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(value);
  const std::uint32_t nan = (x & 0x7fffffffu) > 0x7f800000u ? ~0u : 0u;
  return static_cast<std::uint16_t>(bfloat16_rounding(x, nan));
}

STRATA_HOST_DEVICE float bfloat16_bits_to_float(std::uint16_t b) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

/// A 16-bit float whose every operation converts to float and rounds back.
template <std::uint16_t (*Encode)(float), float (*Decode)(std::uint16_t)>
struct float16_storage {
  std::uint16_t bits = 0;

  float16_storage() = default;
  STRATA_HOST_DEVICE explicit float16_storage(float value) : bits(Encode(value)) {}
  STRATA_HOST_DEVICE explicit operator float() const { return Decode(bits); }

  STRATA_HOST_DEVICE float16_storage& operator+=(float16_storage o) { return *this = float16_storage(float(*this) + float(o)); }
  STRATA_HOST_DEVICE float16_storage& operator*=(float16_storage o) { return *this = float16_storage(float(*this) * float(o)); }
  STRATA_HOST_DEVICE friend float16_storage operator+(float16_storage a, float16_storage b) { return a += b; }
  STRATA_HOST_DEVICE friend bool operator==(float16_storage a, float16_storage b) { return float(a) == float(b); }
};

}  // namespace detail

/// IEEE 754 binary16: 5 exponent bits, 10 mantissa bits, largest finite value 65504.
using half = detail::float16_storage<detail::float_to_half_bits, detail::half_bits_to_float>;
/// bfloat16: float's 8 exponent bits and 7 mantissa bits; float's range, less precision.
using bfloat16 = detail::float16_storage<detail::float_to_bfloat16_bits, detail::bfloat16_bits_to_float>;

}  // namespace strata
