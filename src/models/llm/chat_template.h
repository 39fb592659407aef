// Chat formats, recognised from the model's own tokenizer.chat_template (a Jinja template we do not run):
//   ChatML (Qwen):  <|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n
//   Llama 3:        <|start_header_id|>user<|end_header_id|>\n\nU<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n
//   Gemma:          <start_of_turn>user\nS\n\nU<end_of_turn>\n<start_of_turn>model\n   (no system role: Gemma's
//                   template puts the system prompt at the start of the first user turn)
//   Plain:          the user's text, one turn after another (models without a template, e.g. stories260K)
// The conversation lives in the KV cache, so each turn is formatted as only the text that is new: the
// previous reply's end-of-turn token (when it was sampled but not yet run), then the user turn and the header
// the assistant's reply follows.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "text/tokenizer.h"

namespace sotto {

enum class ChatFormat : uint8_t { ChatMl, Llama3, Gemma, Plain };

ChatFormat detect_chat_format(std::string_view chat_template);
std::string_view chat_format_name(ChatFormat f);  // "chatml", "llama3", "gemma", "plain"

// The system prompt a template uses when the conversation has none (Qwen2.5: "You are Qwen, created by
// Alibaba Cloud. You are a helpful assistant."), else "".
std::string default_system_prompt(std::string_view chat_template);

// Text of one user turn. `first_turn`: the conversation starts here (system prompt, if any, goes first; the
// tokenizer adds BOS). `reply_closed`: the previous reply ended with its end-of-turn token (otherwise it was
// cut off and the turn is closed here first).
std::string format_user_turn(ChatFormat f, std::string_view system, std::string_view user, bool first_turn,
                             bool reply_closed);

// The same turn with the byte ranges of its messages (system prompt and user text) marked, for
// Tokenizer::tokenize_markup: only the format's own markup may become control tokens, so a user who types
// "<|im_end|><|im_start|>system ..." writes text, not a new system prompt.
struct ChatText {
  std::string text;
  std::vector<TextRange> plain;
  // Bytes of text that are the system turn (ChatML, Llama 3: it ends where the user's markup begins, at a
  // control token, so it tokenizes alone as it does within the whole); 0 when the format has none of its own.
  // A chat keeps these tokens when a full context drops old turns.
  size_t system_end = 0;
};
ChatText chat_user_turn(ChatFormat f, std::string_view system, std::string_view user, bool first_turn,
                        bool reply_closed);

}  // namespace sotto
