// Pre-tokenizers of byte-level BPE vocabularies: they cut text into words before BPE merges run inside each
// word. In Hugging Face tokenizers (and in llama.cpp) they are regexes; here each is a hand-written scanner
// over code points that gives the same words as llama.cpp's own scanners (src/unicode.cpp,
// unicode_regex_split_custom_*), including their treatment of \s as Unicode White_Space.
//   Qwen2:   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//   Llama 3: the same with \p{N}{1,3}
//   GPT-2:   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace sotto {

enum class PreTokenizer : uint8_t { Gpt2, Llama3, Qwen2 };

// The words of `cpts`, as lengths in code points (they add up to cpts.size(); none is 0).
std::vector<size_t> split_words(std::span<const uint32_t> cpts, PreTokenizer kind);

}  // namespace sotto
