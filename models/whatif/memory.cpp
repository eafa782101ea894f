// Memory per GPU of the parallel layouts (transform.hpp: MemoryPerGpu, optimizer_state).
#include "models/whatif/fp8.hpp"
#include "models/whatif/transform.hpp"
#include "sim/base/units.hpp"

namespace bneck {

double MemoryPerGpu::total() const {
  double t = buffers;
  for (double part : {parameters, gradients, optimizer, activations})
    if (part > 0) t += part;
  return t;
}

OptimizerState optimizer_state(const Trace& t) {
  OptimizerState s;
  for (const Range& r : t.ranges) {
    const std::string& n = t.strings.str(r.name);
    if (n.rfind("Optimizer.step#", 0) == 0) {
      s.name = n.substr(15, n.find('.', 15) - 15);
      break;
    }
  }
  if (!s.name.empty()) s.per_param = s.name.find("Adam") != std::string::npos ? 2 : 0;  // others: no momentum assumed
  return s;
}

MemoryPerGpu model_state_memory(const Trace& t, double params) {
  MemoryPerGpu m;
  m.parameters = params;
  if (!has_backward(t)) {
    m.gradients = m.optimizer = 0;
    return m;
  }
  const OptimizerState opt = optimizer_state(t);
  m.gradients = params;
  m.optimizer = opt.per_param >= 0 ? opt.per_param * params : -1;
  return m;
}

std::string memory_parts_text(const MemoryPerGpu& m) {
  auto b = [](double x) { return x < 0 ? std::string("unknown") : format_bytes(static_cast<Bytes>(x)); };
  return "gradients " + b(m.gradients) + ", optimizer state " + b(m.optimizer) + (m.optimizer < 0 ? " (no Optimizer.step range)" : "") +
         "; total " + b(m.total());
}

}  // namespace bneck
