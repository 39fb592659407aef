#!/usr/bin/env python3
"""Converts NeMo's exported "nemo128" preprocessor output (tests/fixtures/asr/mel_reference.json: audio and
features as base64 float32, made with the ONNX export, STFT in float64) into tests/data/parakeet/mel_reference.
safetensors, which the C++ test reads with sotto's own safetensors reader. Only the three shorter clips are kept
(the file stays ~0.4 MB); the valid frames only (NeMo's export adds one zeroed frame past them).

  python3 tools/parakeet_mel_fixture.py [--json PATH] [--out PATH]
"""
import argparse, base64, json, struct
import numpy as np


def save_safetensors(path, tensors):
    header, offset, blobs = {}, 0, []
    for name, arr in tensors.items():
        arr = np.ascontiguousarray(arr)
        dtype = {np.float32: "F32", np.int32: "I32"}[arr.dtype.type]
        header[name] = {"dtype": dtype, "shape": list(arr.shape), "data_offsets": [offset, offset + arr.nbytes]}
        offset += arr.nbytes
        blobs.append(arr.tobytes())
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default="tests/fixtures/asr/mel_reference.json")
    ap.add_argument("--out", default="tests/data/parakeet/mel_reference.safetensors")
    args = ap.parse_args()
    d = json.load(open(args.json))
    out = {}
    for name in ["sine_short_0.5s", "noise_1s", "sine_mix_2s"]:
        t = d["tests"][name]
        audio = np.frombuffer(base64.b64decode(t["audio"]), np.float32)
        feats = np.frombuffer(base64.b64decode(t["features"]), np.float32).reshape(t["featuresShape"])[0]
        key = name.replace(".", "_")
        out[key + ".audio"] = audio
        out[key + ".features"] = np.ascontiguousarray(feats[:, : t["featuresLen"]])
    fb = np.frombuffer(base64.b64decode(d["melFilterbank"]["data"]), np.float32).reshape(d["melFilterbank"]["shape"])
    out["mel_filterbank"] = fb
    save_safetensors(args.out, out)


if __name__ == "__main__":
    main()
