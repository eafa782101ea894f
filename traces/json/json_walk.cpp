#include "traces/json/json_walk.hpp"

#include <simdjson.h>

#include <cstdlib>
#include <string>
#include <string_view>

namespace bneck {
namespace {

namespace od = simdjson::ondemand;

struct Walker {
  JsonSax& sax;

  bool object(od::object o) {
    if (!sax.start_object()) return false;
    for (auto field : o) {
      const std::string_view k = field.unescaped_key();
      bool skip = false;
      if (!sax.key(k, skip)) return false;
      if (skip) continue;  // On Demand passes over a value not read
      if (!value(field.value())) return false;
      if (sax.skip_rest()) break;  // On Demand passes over the members not read
    }
    return sax.end_object();
  }
  bool array(od::array a) {
    if (!sax.start_array()) return false;
    for (auto v : a) {
      od::value x = v.value();
      bool skip = false;
      if (!sax.element(x.raw_json_token().data(), skip)) return false;
      if (!skip && !value(x)) return false;  // On Demand passes over an element not read
    }
    return sax.end_array();
  }
  bool value(od::value v) {
    switch (v.type()) {
      case od::json_type::object: return object(v.get_object());
      case od::json_type::array: return array(v.get_array());
      case od::json_type::string: return sax.string(std::string_view(v.get_string()));
      case od::json_type::boolean: return sax.boolean(v.get_bool());
      case od::json_type::null:
        if (!v.is_null()) throw simdjson::simdjson_error(simdjson::N_ATOM_ERROR);
        return sax.null();
      case od::json_type::number: {
        std::string_view raw = v.raw_json_token();  // before the number is read: a float's text as written
        while (!raw.empty() && (raw.back() == ' ' || raw.back() == '\t' || raw.back() == '\n' || raw.back() == '\r')) raw.remove_suffix(1);
        od::number n;
        if (const auto err = v.get_number().get(n); err != simdjson::SUCCESS) {
          // An integer past 64 bits is valid JSON: read as a double, as other parsers do.
          const std::string_view digits = !raw.empty() && raw[0] == '-' ? raw.substr(1) : raw;
          if ((err != simdjson::NUMBER_ERROR && err != simdjson::INCORRECT_TYPE) || digits.empty() ||
              digits.find_first_not_of("0123456789") != std::string_view::npos)
            throw simdjson::simdjson_error(err);
          return sax.number_float(std::strtod(std::string(raw).c_str(), nullptr), raw);
        }
        switch (n.get_number_type()) {  // parsed once, its type with it
          case od::number_type::signed_integer: return sax.number_integer(n.get_int64());
          case od::number_type::unsigned_integer: return sax.number_unsigned(n.get_uint64());
          default: return sax.number_float(n.get_double(), raw);
        }
      }
    }
    throw simdjson::simdjson_error(simdjson::TAPE_ERROR);
  }
};

}  // namespace

JsonWalk walk_json(const char* data, std::size_t len, std::size_t capacity, JsonSax& sax) {
  JsonWalk w;
  od::parser parser;
  Walker walker{sax};
  auto fail = [&](od::document* doc, simdjson::error_code e) {
    const char* at = nullptr;
    w.error_at = doc && doc->current_location().get(at) == simdjson::SUCCESS ? static_cast<std::size_t>(at - data) : len;
    w.error = simdjson::error_message(e);
  };
  try {
    od::document doc = parser.iterate(simdjson::padded_string_view(data, len, capacity));
    try {
      bool ok = false;
      switch (doc.type()) {
        case od::json_type::object: ok = walker.object(doc.get_object()); break;
        case od::json_type::array: ok = walker.array(doc.get_array()); break;
        default: throw simdjson::simdjson_error(simdjson::TAPE_ERROR);  // a scalar document
      }
      if (!ok) {
        w.handler_stop = true;
        return w;
      }
      // Anything but whitespace after the root value: trailing content.
      const char* at = nullptr;
      if (doc.current_location().get(at) == simdjson::SUCCESS && at < data + len &&
          std::string_view(at, static_cast<std::size_t>(data + len - at)).find_first_not_of(" \t\r\n") != std::string_view::npos)
        throw simdjson::simdjson_error(simdjson::TRAILING_CONTENT);
      w.ok = true;
    } catch (const simdjson::simdjson_error& e) { fail(&doc, e.error()); }
  } catch (const simdjson::simdjson_error& e) { fail(nullptr, e.error()); }
  return w;
}

struct JsonArrayWalker::Impl {
  od::parser parser;
};

JsonArrayWalker::JsonArrayWalker() : impl_(std::make_unique<Impl>()) {}
JsonArrayWalker::~JsonArrayWalker() = default;

JsonWalk JsonArrayWalker::elements(const char* data, std::size_t len, std::size_t capacity, JsonSax& sax, std::size_t& close) {
  JsonWalk w;
  Walker walker{sax};
  try {
    od::document doc = impl_->parser.iterate(simdjson::padded_string_view(data, len, capacity));
    try {
      for (auto v : doc.get_array()) {
        od::value x = v.value();
        w.element_at = static_cast<std::size_t>(x.raw_json_token().data() - data);
        w.element_whole = false;
        if (!walker.value(x)) {
          w.handler_stop = true;
          return w;
        }
        w.element_whole = true;
      }
      // Past the closing bracket: the next token, or the end of the text.
      const char* at = nullptr;
      std::size_t after = len;
      if (doc.current_location().get(at) == simdjson::SUCCESS && at >= data && at <= data + len)
        after = static_cast<std::size_t>(at - data);
      while (after > 0 && data[after - 1] != ']') --after;
      if (after == 0) throw simdjson::simdjson_error(simdjson::TAPE_ERROR);
      close = after - 1;
      w.ok = true;
    } catch (const simdjson::simdjson_error& e) {
      const char* at = nullptr;
      w.error_at = doc.current_location().get(at) == simdjson::SUCCESS ? static_cast<std::size_t>(at - data) : len;
      w.error = simdjson::error_message(e.error());
    }
  } catch (const simdjson::simdjson_error& e) {
    w.error_at = len;
    w.error = simdjson::error_message(e.error());
  }
  return w;
}

}  // namespace bneck
