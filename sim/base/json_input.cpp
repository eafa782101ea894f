#include "sim/base/json_input.hpp"

namespace bneck {

namespace {
template <typename Input>
nlohmann::json parse_checked(Input&& in, const std::string& path) {
  auto depth_limit = [&](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
    if (depth > kMaxJsonDepth) throw InputError(path, "JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    return true;
  };
  try {
    return nlohmann::json::parse(std::forward<Input>(in), depth_limit);
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(path, "malformed JSON at byte " + std::to_string(e.byte) + ": " + e.what());
  } catch (const nlohmann::json::exception& e) {  // out_of_range: a number beyond double's range
    throw InputError(path, std::string("malformed JSON: ") + e.what());
  }
}
}  // namespace

nlohmann::json parse_json_input(std::istream& in, const std::string& path) { return parse_checked(in, path); }
nlohmann::json parse_json_input(const std::string& text, const std::string& path) { return parse_checked(text, path); }

}  // namespace bneck
