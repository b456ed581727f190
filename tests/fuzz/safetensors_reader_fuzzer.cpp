// libFuzzer target for the safetensors reader: any input either opens and reads back every
// tensor it lists within the file, or is refused with safetensors::format_error (nothing
// else, no crash, no sanitizer report). The input is handed over as a file (memfd), as the
// reader reads files in place.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

#include "strata/ckpt/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const int fd = ::memfd_create("safetensors-fuzz", MFD_CLOEXEC);
  if (fd < 0 || ::write(fd, data, size) != static_cast<ssize_t>(size)) std::abort();
  try {
    const strata::ckpt::safetensors::reader r("/proc/self/fd/" + std::to_string(fd));
    std::uint64_t covered = 0;
    for (const auto& t : r.tensors()) {
      if (t.end < t.begin || t.end > size) std::abort();  // the header promised bytes the file lacks
      covered += t.end - t.begin;
      if (!t.type || t.elements() > (1 << 16)) continue;
      std::vector<float> values(static_cast<std::size_t>(t.elements()));
      r.read_floats(t, 0, values);
    }
    if (covered > size) std::abort();
  } catch (const strata::ckpt::safetensors::format_error&) {
  }
  ::close(fd);
  return 0;
}
