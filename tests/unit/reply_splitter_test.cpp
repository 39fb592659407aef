// The native reply splitter (`sotto agent`) against the agent page's (web/agent/sentences.js): every streamed
// reply in tests/fixtures/agent/reply_pieces.json (written by the page's code, tools/reply_pieces_reference.mjs)
// must come out as the same pieces, whole and in token-like chunks.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "io/json.h"
#include "test_support.h"
#include "text/reply_splitter.h"

namespace sotto {
namespace {

TEST(ReplySplitter, SpeaksThePagesPiecesOnEveryReference) {
  const std::vector<uint8_t> bytes = testing::read_fixture("agent/reply_pieces.json");
  ASSERT_FALSE(bytes.empty());
  auto doc = parse_json(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  ASSERT_TRUE(doc.ok()) << doc.message();
  const JsonValue* cases = doc->find("cases");
  ASSERT_TRUE(cases && cases->is_array());
  ASSERT_GE(cases->items.size(), 40u);
  for (const JsonValue& c : cases->items) {
    text::ReplySplitter split(std::stoul(c.find("first_words")->text));
    std::vector<std::string> pieces;
    std::string reply;
    for (const JsonValue& chunk : c.find("chunks")->items) {
      reply += chunk.text;
      for (std::string& p : split.push(chunk.text)) pieces.push_back(std::move(p));
    }
    if (std::string rest = split.flush(); !rest.empty()) pieces.push_back(rest);
    std::vector<std::string> expected;
    for (const JsonValue& p : c.find("pieces")->items) expected.push_back(p.text);
    EXPECT_EQ(pieces, expected) << "first_words " << c.find("first_words")->text << ", "
                                << c.find("chunks")->items.size() << " chunks of: " << reply;
  }
}

TEST(ReplySplitter, AFirstPieceIsAShortClauseThenSentences) {
  text::ReplySplitter split(5);
  std::vector<std::string> pieces;
  for (std::string_view token :
       {"Sure", ",", " I", " can", " help", " with", " that", ".", " What", "?", " "})
    for (std::string& p : split.push(token)) pieces.push_back(p);
  EXPECT_EQ(pieces, (std::vector<std::string>{"Sure, I can help with"}));
  EXPECT_EQ(split.flush(), "that. What?");
  EXPECT_EQ(split.flush(), "");
}

}  // namespace
}  // namespace sotto
