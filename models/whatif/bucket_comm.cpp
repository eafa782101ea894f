// --bucket-comm BYTES. Model card: fewer, larger collectives (DDP's bucket_cap_mb, gradients
//   coalesced before their all-reduce). The trace's collectives are taken in each process group's
//   order; a run of consecutive ones of one kind, one element type (the NCCL kernel's _f32, _bf16,
//   ... suffix) and the same streams is cut into buckets of at most BYTES (a collective already
//   larger stays alone). On every rank a bucket runs as its last member: it starts when the inputs
//   of all its members are ready (the removed members keep their dependencies and take no time, so
//   a larger bucket starts later: the trade-off against overlap) and takes the members' measured
//   times x the collective model's time for the bucket's bytes over the sum of its times for each
//   member's (models/collective.hpp: the latency of each call saved, the bandwidth part kept). The
//   removed members' launch calls take no time. Checked against measurements: the collective
//   model's merges on Vidur's held-out 4-GPU NCCL all-reduce profiles (tests/test_cross_gpu.cpp);
//   no traced pair of bucket sizes (none measured on two GPUs).
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include "models/collective.hpp"
#include "models/whatif/transform.hpp"
#include "sim/base/error.hpp"
#include "sim/base/units.hpp"

namespace bneck {

namespace {

// "_f32", "_bf16", ... of an NCCL kernel name ("ncclDevKernel_AllReduce_Sum_f32_RING_LL"), or "".
std::string element_type(const std::string& name) {
  for (const char* t : {"_f32", "_f16", "_bf16", "_f64", "_i32", "_u32", "_i64", "_u64", "_i8", "_u8", "_f8"})
    if (name.find(t) != std::string::npos) return t;
  return "";
}

class BucketComm : public TransformStep {
 public:
  explicit BucketComm(Bytes cap) : cap_(cap) {}
  void apply(const WhatIfContext& ctx, WhatIfCase& c) const override {
    const Trace& t = ctx.trace;
    Graph& g = c.edit_graph();
    // The collectives with sizes, in each group's order.
    std::vector<std::size_t> order;
    for (std::size_t i = 0; i < t.collectives.size(); ++i) {
      const Collective& col = t.collectives[i];
      bool live = col.bytes > 0 && !col.members.empty();
      for (OpId m : col.members) live = live && !g.removed(m);
      if (live) order.push_back(i);
    }
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      const Collective &x = t.collectives[a], &y = t.collectives[b];
      return x.group != y.group ? x.group < y.group : x.seq < y.seq;
    });
    auto same_run = [&](const Collective& a, const Collective& b) {
      if (a.group != b.group || a.kind != b.kind || a.ranks() != b.ranks() || a.members.size() != b.members.size() || b.seq != a.seq + 1)
        return false;
      if (element_type(t.name(t.ops[a.members[0]])) != element_type(t.name(t.ops[b.members[0]]))) return false;
      for (std::size_t r = 0; r < a.members.size(); ++r)
        if (t.ops[a.members[r]].lane != t.ops[b.members[r]].lane) return false;
      return true;
    };
    auto model = [&](const Collective& col, Bytes b) {
      return static_cast<double>(collective_time(c.spec, col.kind, b, col.ranks()).time_ns);
    };
    GraphEditor ed(g, text);
    std::size_t buckets = 0, merged = 0, before_n = 0;
    TimeNs before = 0, after = 0;
    std::vector<std::size_t> bucket;
    Bytes bytes = 0;
    auto flush = [&]() {
      if (bucket.size() >= 2) {
        const Collective& last = t.collectives[bucket.back()];
        double parts = 0;
        for (std::size_t i : bucket) parts += model(t.collectives[i], t.collectives[i].bytes);
        const double whole = model(last, bytes);
        const double ratio = parts > 0 && whole > 0 ? std::min(1.0, whole / parts) : 1.0;
        for (std::size_t r = 0; r < last.members.size(); ++r) {
          TimeNs sum = 0;
          for (std::size_t i : bucket) {
            const OpId m = t.collectives[i].members[r];
            sum += c.durations[m];
            if (i == bucket.back()) continue;
            ed.remove(m);
            c.durations[m] = 0;
            if (t.ops[m].link != kNone) c.durations[t.ops[m].link] = 0;
          }
          const TimeNs d = static_cast<TimeNs>(std::llround(static_cast<double>(sum) * ratio));
          before += sum;
          after += d;
          c.durations[last.members[r]] = d;
        }
        ++buckets;
        merged += bucket.size();
      }
      bucket.clear();
      bytes = 0;
    };
    for (std::size_t k = 0; k < order.size(); ++k) {
      const Collective& col = t.collectives[order[k]];
      ++before_n;
      if (!bucket.empty() && (!same_run(t.collectives[bucket.back()], col) || bytes + col.bytes > cap_)) flush();
      bucket.push_back(order[k]);
      bytes += col.bytes;
    }
    flush();
    ed.commit();
    if (buckets == 0)
      throw InputError(text + ": no two consecutive collectives of one kind and group fit in " + format_bytes(cap_) + " together" +
                       (before_n ? "" : " (the trace has no collectives with sizes)"));
    c.log.push_back(text + ": " + std::to_string(merged) + " of " + std::to_string(before_n) + " collectives coalesced into " +
                    std::to_string(buckets) + " buckets of at most " + format_bytes(cap_) + ", their kernels " + format_duration(before) +
                    " -> " + format_duration(after) +
                    " (the collective model's latency saved); each bucket starts when all its inputs are ready");
  }

 private:
  Bytes cap_;
};

std::unique_ptr<TransformStep> parse(const std::string& arg) {
  Bytes b = 0;
  try {
    b = parse_bytes(arg);
  } catch (const InputError&) { throw InputError("--bucket-comm " + arg + ": expected a size such as \"25 MiB\""); }
  if (b <= 0) throw InputError("--bucket-comm " + arg + ": the bucket size must be positive");
  return std::make_unique<BucketComm>(b);
}

}  // namespace

extern const TransformDef kBucketCommTransform{"bucket-comm", "BYTES", TransformDef::Arg::Required,
                                               "consecutive collectives of one kind and group coalesced into buckets of at most BYTES "
                                               "(fewer, larger collectives: DDP's bucket_cap_mb)",
                                               parse};

}  // namespace bneck
