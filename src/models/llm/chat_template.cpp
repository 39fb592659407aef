#include "models/llm/chat_template.h"

#include "core/error.h"

namespace sotto {

ChatFormat detect_chat_format(std::string_view chat_template) {
  if (chat_template.find("<|im_start|>") != std::string_view::npos) return ChatFormat::ChatMl;
  if (chat_template.find("<|start_header_id|>") != std::string_view::npos) return ChatFormat::Llama3;
  if (chat_template.find("<start_of_turn>") != std::string_view::npos) return ChatFormat::Gemma;
  return ChatFormat::Plain;
}

std::string_view chat_format_name(ChatFormat f) {
  switch (f) {
    case ChatFormat::ChatMl:
      return "chatml";
    case ChatFormat::Llama3:
      return "llama3";
    case ChatFormat::Gemma:
      return "gemma";
    case ChatFormat::Plain:
      return "plain";
  }
  return "?";
}

std::string default_system_prompt(std::string_view chat_template) {
  constexpr std::string_view kQwen = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";
  if (chat_template.find(kQwen) != std::string_view::npos) return std::string(kQwen);
  return "";
}

std::string format_user_turn(ChatFormat f, std::string_view system, std::string_view user, bool first_turn,
                             bool reply_closed) {
  return chat_user_turn(f, system, user, first_turn, reply_closed).text;
}

ChatText chat_user_turn(ChatFormat f, std::string_view system, std::string_view user, bool first_turn,
                        bool reply_closed) {
  ChatText out;
  std::string& text = out.text;
  auto markup = [&](std::string_view s) { text += s; };
  auto message = [&](std::string_view s) {
    out.plain.push_back({text.size(), text.size() + s.size()});
    text += s;
  };
  const bool with_system = first_turn && !system.empty();
  switch (f) {
    case ChatFormat::ChatMl:
      if (!first_turn) markup(cat(reply_closed ? "" : "<|im_end|>", "\n"));
      if (with_system) {
        markup("<|im_start|>system\n");
        message(system);
        markup("<|im_end|>\n");
        out.system_end = text.size();
      }
      markup("<|im_start|>user\n");
      message(user);
      markup("<|im_end|>\n<|im_start|>assistant\n");
      break;
    case ChatFormat::Llama3:
      if (!first_turn && !reply_closed) markup("<|eot_id|>");
      if (with_system) {
        markup("<|start_header_id|>system<|end_header_id|>\n\n");
        message(system);
        markup("<|eot_id|>");
        out.system_end = text.size();
      }
      markup("<|start_header_id|>user<|end_header_id|>\n\n");
      message(user);
      markup("<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
      break;
    case ChatFormat::Gemma:
      if (!first_turn) markup(cat(reply_closed ? "" : "<end_of_turn>", "\n"));
      markup("<start_of_turn>user\n");
      if (with_system) {
        message(system);
        markup("\n\n");
      }
      message(user);
      markup("<end_of_turn>\n<start_of_turn>model\n");
      break;
    case ChatFormat::Plain:
      if (!first_turn) markup("\n");
      message(user);
      break;
  }
  return out;
}

}  // namespace sotto
