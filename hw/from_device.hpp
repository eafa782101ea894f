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

// "NVIDIA GeForce RTX 4090" -> "nvidia-geforce-rtx-4090".
std::string spec_slug(const std::string& device_name);

}  // namespace bneck
