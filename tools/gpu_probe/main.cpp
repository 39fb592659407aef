// sotto_gpu_probe [--token | --bandwidth]: see probe.h. Native only, like every tool.
#include <cstdio>
#include <string>

#include "gpu/device.h"
#include "probe.h"

int main(int argc, char** argv) {
  using namespace sotto;
  const std::string mode = argc == 2 ? std::string(argv[1]) : std::string();
  if (argc > 2 || (!mode.empty() && mode != "--token" && mode != "--bandwidth")) {
    std::fprintf(stderr, "usage: sotto_gpu_probe [--token | --bandwidth]\n");
    return 2;
  }
  auto device = gpu::open_device(gpu::DeviceOptions{});
  if (!device) {
    std::fprintf(stderr, "sotto_gpu_probe: %s\n", device.message().c_str());
    return 1;
  }
  std::printf("%s\n", (*device)->info().description.c_str());
  const Status s = mode == "--token"       ? probe::probe_token(**device)
                   : mode == "--bandwidth" ? probe::probe_bandwidth(**device)
                                           : probe::probe_barrier(**device);
  if (!s.ok()) {
    std::fprintf(stderr, "sotto_gpu_probe: %s\n", s.message().c_str());
    return 1;
  }
  return 0;
}
