// The advice (models/advise.hpp) as text and JSON: the same figures in both.
#pragma once
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

#include "models/advise.hpp"

namespace bneck {

nlohmann::json advice_json(const Advice& a);
// Lines of at most 200 characters.
void print_advice_text(const Advice& a, const std::string& source, std::ostream& out);

}  // namespace bneck
