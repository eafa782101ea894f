// Sorting schedules that are nearly in order already (a replay's starts follow the trace's order
// but for a few ops that moved by nanoseconds).
#pragma once
#include <algorithm>
#include <cstddef>
#include <iterator>

namespace bneck {

// Sorts [first, last) by `less`: insertion sort while it moves few elements (at most
// 4 x size + 4096 moves: linear on nearly sorted input), else std::sort. Same result as std::sort
// for a strict total order.
template <class It, class Less>
void sort_nearly_sorted(It first, It last, Less less) {
  const auto n = static_cast<std::size_t>(std::distance(first, last));
  std::size_t budget = 4 * n + 4096;
  for (It i = first; i != last; ++i) {
    if (i == first || !less(*i, *std::prev(i))) continue;
    auto v = std::move(*i);
    It j = i;
    do {
      *j = std::move(*std::prev(j));
      --j;
      if (budget-- == 0) {  // far from sorted: [first, i] is a permutation still, sort it all
        *j = std::move(v);
        std::sort(first, last, less);
        return;
      }
    } while (j != first && less(v, *std::prev(j)));
    *j = std::move(v);
  }
}

}  // namespace bneck
