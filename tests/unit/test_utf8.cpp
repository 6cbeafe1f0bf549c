#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "base/utf8.h"

using surf::shorten_utf8;
using surf::utf8_prefix;

TEST_CASE("cuts never split a UTF-8 character, so the result always serialises as JSON") {
    const std::string text = "prix: 25 € — テキスト 👍 naïve";
    for (size_t n = 0; n <= text.size() + 2; ++n) {
        const std::string cut(utf8_prefix(text, n));
        CHECK(cut.size() <= n);
        CHECK(text.compare(0, cut.size(), cut) == 0);
        CHECK_NOTHROW((void)nlohmann::json(shorten_utf8(text, n)).dump());
    }
    CHECK(utf8_prefix("€x", 2) == "");  // 3-byte character cut: nothing of it kept
    CHECK(utf8_prefix("€x", 3) == "€");
    CHECK(shorten_utf8("abcdef", 3, "...") == "abc...");
    CHECK(shorten_utf8("abc", 3, "...") == "abc");
}

TEST_CASE("closest_name suggests a near name for a typo and nothing for another word") {
    using surf::closest_name;
    using surf::edit_distance;
    CHECK(edit_distance("kitten", "sitting") == 3);
    CHECK(edit_distance("", "abc") == 3);
    const std::vector<std::string> keys = {"max-steps", "concurrency", "judge", "out"};
    CHECK(closest_name("max-step", keys) == "max-steps");
    CHECK(closest_name("concurency", keys) == "concurrency");
    CHECK(closest_name("jduge", keys) == "judge");
    CHECK(closest_name("viewport", keys) == "");
}
