#include <catch2/catch.hpp>

#include "helpers.hpp"
#include "sim/base/error.hpp"
#include "sim/whatif/selector.hpp"

using namespace bneck;
using namespace bneck::test;

namespace {
std::size_t count(const Trace& t, const std::string& sel) {
  Selector s = Selector::parse(sel);
  s.bind(t);
  std::size_t n = 0;
  for (OpId i = 0; i < t.ops.size(); ++i) n += s.matches(i);
  return n;
}
}  // namespace

TEST_CASE("selectors pick ops by name, kind, stream, duration, range and id", "[selector]") {
  Trace t = load_trace(demo_trace());
  CHECK(count(t, "kind=kernel") == 48);
  CHECK(count(t, "kind=memcpy") == 12);
  CHECK(count(t, "name~^spin") == 12);
  CHECK(count(t, "kind=kernel&name~axpy") == 12);
  CHECK(count(t, "kind=kernel&name~spin&dur>200us") == 6);  // the 300 us spins, not the 150 us ones
  CHECK(count(t, "kind=kernel&range~consumers") == 36);     // axpy, spin, 3 graph nodes, spin: 6 per iteration
  CHECK(count(t, "kind=kernel&range~iter0") == 8);
  CHECK(count(t, "id=0,1,2") == 3);
  CHECK(count(t, "kind=collective") == 0);
  CHECK(count(t, "device=0&kind=memset") == 2);
  CHECK_THROWS_AS(Selector::parse("speed>3"), InputError);
  CHECK_THROWS_AS(Selector::parse("name~(unclosed"), InputError);
  CHECK_THROWS_AS(Selector::parse("dur>fast"), InputError);
  CHECK_THROWS_AS(Selector::parse("kind=banana"), InputError);
}

TEST_CASE("kind=kernel selects compute kernels, the NCCL kernels are kind=collective", "[selector]") {
  // A two-GPU DDP step (validate/reference/h200/ddp): its all-reduce kernels are kernels to CUDA,
  // collectives to a selector, never both.
  Trace t = load_trace(source_dir() + "/validate/reference/h200/ddp/ddp2_rank0.json.gz");
  std::size_t kernels = 0, nccl = 0;
  for (const Op& o : t.ops) {
    kernels += o.kind == OpKind::Kernel;
    nccl += o.kind == OpKind::Kernel && (o.flags & Op::kFlagNccl);
  }
  REQUIRE(nccl > 0);
  CHECK(count(t, "kind=collective") == nccl);
  CHECK(count(t, "kind=kernel") == kernels - nccl);
  CHECK(count(t, "kind=kernel&name~nccl") == 0);
}
