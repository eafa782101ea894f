#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <vector>

#include "sim/base/error.hpp"
#include "sim/base/sort.hpp"
#include "sim/base/units.hpp"

using namespace bneck;

TEST_CASE("durations carry units and become integer nanoseconds", "[units]") {
  CHECK(parse_duration("2 us") == 2000);
  CHECK(parse_duration("1.5ms") == 1'500'000);
  CHECK(parse_duration("300 ns") == 300);
  CHECK(parse_duration("2 s") == 2'000'000'000);
  CHECK(parse_duration("0.0004 us") == 0);           // rounds to the nearest ns
  CHECK_THROWS_AS(parse_duration("5"), InputError);  // no unit
  CHECK(parse_duration("0") == 0);                   // zero needs none
  CHECK(parse_bytes("0") == 0);
  CHECK_THROWS_AS(parse_bytes("48"), InputError);
  CHECK_THROWS_AS(parse_duration("5 parsecs"), InputError);
  CHECK_THROWS_AS(parse_duration("fast"), InputError);
}

TEST_CASE("rates and sizes parse with SI and binary prefixes", "[units]") {
  CHECK(parse_bandwidth("4.8 TB/s") == Approx(4.8e12));
  CHECK(parse_bandwidth("64 GiB/s") == Approx(64.0 * (1ull << 30)));
  CHECK(parse_frequency("1.98 GHz") == Approx(1.98e9));
  CHECK(parse_bytes("60 MiB") == 60ull << 20);
  CHECK(parse_bytes("4096 B") == 4096);
  CHECK_THROWS_AS(parse_bandwidth("4.8 TB"), InputError);
  CHECK(format_duration(12'204'000) == "12.204 ms");
  CHECK(format_bytes(64ull << 20) == "64 MiB");
}

TEST_CASE("sort_nearly_sorted: std::sort's order, nearly sorted or not", "[base]") {
  std::mt19937 rng(7);
  auto less = [](const std::pair<int, int>& a, const std::pair<int, int>& b) { return a < b; };
  for (int swaps : {0, 3, 100, 1000000}) {  // 1e6 swaps: shuffled, past the insertion budget
    std::vector<std::pair<int, int>> v(20000);
    for (int i = 0; i < 20000; ++i) v[i] = {i / 3, i % 7};
    for (int k = 0; k < swaps; ++k) {
      std::size_t a = rng() % v.size(), b = swaps < 1000 ? std::min(v.size() - 1, a + 1 + rng() % 3) : rng() % v.size();
      std::swap(v[a], v[b]);
    }
    auto want = v;
    std::sort(want.begin(), want.end(), less);
    sort_nearly_sorted(v.begin(), v.end(), less);
    CHECK(v == want);
  }
  std::vector<int> empty;
  sort_nearly_sorted(empty.begin(), empty.end(), std::less<>());
  CHECK(empty.empty());
}

TEST_CASE("an error line is cut with \"...\" only where something is cut", "[base]") {
  // kMax = 183 characters fit; the 184th is cut and "..." said instead (186 in all). A message of
  // exactly 183 characters is whole: it once got a "..." it did not need (a path 12 characters
  // longer made the no-nsys line of an Nsight Systems report end in "`...").
  const std::string fits(InputError::kMax, 'a');
  CHECK(std::string(InputError(fits).what()) == fits);
  CHECK(std::string(InputError(fits + "b").what()) == fits + "...");
  // Whitespace folds to one space; a space that would be the 184th character is dropped with the cut.
  const std::string short_by_one(InputError::kMax - 1, 'a');
  CHECK(std::string(InputError(short_by_one + "\n\n b").what()) == short_by_one + "...");
  CHECK(std::string(InputError(short_by_one + "\n").what()) == short_by_one);
  CHECK(std::string(InputError("x \n\t y").what()) == "x y");
}
