#pragma once
// A vector register's worth of floats (GCC's and Clang's vector extensions), and their
// conversions to and from a 16-bit wire type in registers. A loop that scales, sums,
// rounds and keeps the rounding error with them reads and writes memory once; converting
// through a buffer costs a pass per conversion (the ring's FP16 sums took 2-4x as long).
// x86's F16C converts eight halves in one instruction; bfloat16's rounding is integer
// arithmetic on all lanes at once; without F16C a half is converted lane by lane. Host code.
//
// The lanes are as wide as the target's registers (8 floats with AVX, else 4), so that
// vectors never travel in memory between calls, where the two conventions would differ.
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "strata/numeric/float16.hpp"

#if defined(__CUDACC__)
#error "strata/numeric/lanes.hpp is host code; a GPU converts with its own instructions (strata/cuda/cast.cuh)"
#endif

#if defined(__F16C__) && defined(__AVX__)
#include <immintrin.h>
#endif

namespace strata::lanes {

#if defined(__AVX__)
inline constexpr std::size_t width = 8;
#else
inline constexpr std::size_t width = 4;
#endif
using floats = float __attribute__((vector_size(width * sizeof(float))));
using mask = std::uint32_t __attribute__((vector_size(width * sizeof(std::uint32_t))));
/// The bits of `width` 16-bit values (half, bfloat16).
using bits16 = std::uint16_t __attribute__((vector_size(width * sizeof(std::uint16_t))));

/// A count of lanes: `width` as a constant type for a full step (its copies compile to
/// single vector moves), a std::size_t under `width` for a tail.
using full = std::integral_constant<std::size_t, width>;

/// Whether T is one of the 16-bit floats the lanes convert. (Their bits, a uint16_t member,
/// are what the 16-bit vectors load and store.)
template <class T>
inline constexpr bool is_float16 = std::is_same_v<T, half> || std::is_same_v<T, bfloat16>;

namespace detail {
// A full step moves whole vectors through types of the elements' own alignment, which
// (unlike memcpy) tell the compiler that a store of floats changes no pointer or mask that
// the loop keeps in a register. A tail is copied through memory.
// (typedef, not using: Clang drops `aligned` from an alias declaration.)
typedef float floats_unaligned __attribute__((vector_size(width * sizeof(float)), aligned(alignof(float))));
typedef std::uint16_t bits16_unaligned
    __attribute__((vector_size(width * sizeof(std::uint16_t)), aligned(alignof(std::uint16_t))));
static_assert(alignof(floats_unaligned) == alignof(float) && alignof(bits16_unaligned) == alignof(std::uint16_t));

template <class V>
V tail_in(const void* p, std::size_t bytes) {
  V v{};
  std::memcpy(&v, p, bytes);
  return v;
}
template <class V>
void tail_out(const V& v, void* p, std::size_t bytes) {
  std::memcpy(p, &v, bytes);
}
}  // namespace detail

/// `m` floats from `p`; the lanes from m on are zero.
template <class M = full>
floats load(const float* p, M m = {}) {
  if constexpr (std::is_same_v<M, full>) return *reinterpret_cast<const detail::floats_unaligned*>(p);
  else return detail::tail_in<floats>(p, m * sizeof(float));
}
template <class M = full>
void store(floats v, float* p, M m = {}) {
  if constexpr (std::is_same_v<M, full>) *reinterpret_cast<detail::floats_unaligned*>(p) = v;
  else detail::tail_out(v, p, m * sizeof(float));
}

/// The bits of `m` 16-bit values from `p`; the lanes from m on are zero.
template <class W, class M = full>
bits16 load(const W* p, M m = {}) {
  static_assert(is_float16<W>, "the lanes convert half and bfloat16");
  if constexpr (std::is_same_v<M, full>) return *reinterpret_cast<const detail::bits16_unaligned*>(p);
  else return detail::tail_in<bits16>(p, m * sizeof(W));
}
template <class W, class M = full>
void store(bits16 bits, W* p, M m = {}) {
  static_assert(is_float16<W>, "the lanes convert half and bfloat16");
  if constexpr (std::is_same_v<M, full>) *reinterpret_cast<detail::bits16_unaligned*>(p) = bits;
  else detail::tail_out(bits, p, m * sizeof(W));
}

/// The floats that the lanes' W hold.
template <class W>
floats widen(bits16 bits) {
  if constexpr (std::is_same_v<W, bfloat16>) {
    return reinterpret_cast<floats>(__builtin_convertvector(bits, mask) << 16);
  } else {
#if defined(__F16C__) && defined(__AVX__)
    return reinterpret_cast<floats>(_mm256_cvtph_ps(reinterpret_cast<__m128i>(bits)));
#else
    floats v;
    for (std::size_t j = 0; j < width; ++j) v[j] = static_cast<float>(std::bit_cast<W>(bits[j]));
    return v;
#endif
  }
}

/// The bits of the lanes' floats rounded to the nearest W (ties to even).
template <class W>
bits16 narrow(floats v) {
  if constexpr (std::is_same_v<W, bfloat16>) {  // as strata::detail::float_to_bfloat16_bits, on every lane
    const mask x = reinterpret_cast<mask>(v);
    const mask nan = reinterpret_cast<mask>((x & 0x7fffffffu) > 0x7f800000u);  // all ones where NaN
    return __builtin_convertvector(strata::detail::bfloat16_rounding(x, nan), bits16);
  } else {
#if defined(__F16C__) && defined(__AVX__)
    return reinterpret_cast<bits16>(_mm256_cvtps_ph(reinterpret_cast<__m256>(v), _MM_FROUND_TO_NEAREST_INT));
#else
    bits16 bits;
    for (std::size_t j = 0; j < width; ++j) bits[j] = W(v[j]).bits;
    return bits;
#endif
  }
}

/// The lanes' sums of two W, rounded to W once, as W's + rounds them.
template <class W>
bits16 add(bits16 a, bits16 b) {
  return narrow<W>(widen<W>(a) + widen<W>(b));
}

/// All ones in the lanes that hold NaN or an infinity (an all-ones exponent), else zero.
inline mask nonfinite(floats v) {
  return reinterpret_cast<mask>((reinterpret_cast<mask>(v) & 0x7f800000u) == 0x7f800000u);
}

/// f(offset, m) over [0, n) in steps of `width`, the last step with the m < width left
/// (f takes `auto m`, and passes it on). f returns a mask of lanes to flag (nonfinite);
/// returns whether any lane was flagged. (Folded here rather than in a variable that f
/// captures, which the compiler would keep in memory.)
template <class F>
bool for_each_step(std::size_t n, F&& f) {
  mask flagged{};
  std::size_t k = 0;
  for (; k + width <= n; k += width) flagged |= f(k, full{});
  if (k < n) flagged |= f(k, n - k);
  std::uint32_t any = 0;
  for (std::size_t j = 0; j < width; ++j) any |= flagged[j];
  return any != 0;
}

/// sum[i] = a[i] + b[i] over n values of T, rounded to T, then times `scale` where it is
/// not 1, rounded again: as T's own + and * round (sum may be a or b). The one sum of the
/// all-reduces and of the backends' sum operations: 16-bit floats through the lanes, other
/// types by plain loops, which vectorize (one pass each: a 1 MiB chunk is not in L1 twice).
template <class T>
void add(const T* a, const T* b, T* sum, std::size_t n, T scale = T{1}) {
  if constexpr (is_float16<T>) {
    const float by = static_cast<float>(scale);
    for_each_step(n, [&](std::size_t k, auto m) {
      const bits16 rounded = add<T>(load(a + k, m), load(b + k, m));
      store(by == 1.0f ? rounded : narrow<T>(widen<T>(rounded) * by), sum + k, m);
      return mask{};
    });
  } else if (scale == T{1}) {
    for (std::size_t k = 0; k < n; ++k) sum[k] = a[k] + b[k];
  } else {
    for (std::size_t k = 0; k < n; ++k) {
      T rounded = a[k] + b[k];  // rounded to T, then scaled: as two passes would
      rounded *= scale;
      sum[k] = rounded;
    }
  }
}

}  // namespace strata::lanes
