// A base spec for a GPU that no preset matches, from the properties the validate benchmarks record
// (CUDA device attributes) and per-architecture rates per SM and clock (the datasheet peaks of the
// architecture's parts, divided by their SMs and boost clocks). Every number says where it came
// from in `sources`: "device property" or "guessed: ...".
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace bneck {

// `device`: the "device" object of a bneck_validate measurements file. Throws InputError when it
// lacks the name, SM count or clock.
nlohmann::json spec_from_device(const nlohmann::json& device, const std::string& origin);

// A base spec for the GPU a trace names but no preset matches, from the device properties the
// trace records (name, SMs or CUs, compute capability, memory: Kineto's deviceProperties, nsys's
// TARGET_INFO_GPU) and per-architecture rates per SM (CU) and clock at the architecture's boost
// clock (guessed, as the trace records no clock): NVIDIA by compute capability (above), AMD
// Instinct by part name (CDNA2, CDNA3, their datasheet peaks / CUs / peak engine clock, their
// memory bandwidth). "" in `why` and a null JSON when the properties do not tell (no SM count,
// an AMD part not in the table); else `why` says what the spec rests on, in one line.
nlohmann::json spec_from_trace_device(const std::string& name, unsigned sm_count, int cc_major, int cc_minor, double memory_bytes,
                                      double clock_hz, std::string& why);

// The AMD Instinct part whose compute units and gfx version (HIP's compute capability: gfx942 is
// 9.4, gfx90a 9.0) a device shows, for a ROCm profile whose deviceProperties leave the name empty
// (vLLM's on an MI300X): 304 CUs at 9.4 an MI300X, 228 at 9.4 an MI300A, 104 at 9.0 an MI210 (or
// one die of an MI250, the same CUs and bandwidth a die). "" where none is certain.
std::string amd_part_from_properties(unsigned sm_count, int cc_major, int cc_minor);

// "NVIDIA GeForce RTX 4090" -> "nvidia-geforce-rtx-4090".
std::string spec_slug(const std::string& device_name);

}  // namespace bneck
