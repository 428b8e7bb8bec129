"""Compares our HNSW and embedding throughput with hnswlib and onnxruntime on the same inputs.

Reads what `memory-eval dump-vectors` wrote (vectors.bin, texts.txt) and what `memory-eval bench-hnsw`
and `bench-embed` measured (ours_hnsw.json, ours_embed.json), measures the Python side in this process,
prints a table with the ratios and writes compare.json next to the inputs.

HNSW: same vectors, same M (24) and ef_construction (200), inner product on unit vectors (= cosine),
the graph built on every core (ours builds in parallel too), one query per call on one thread, recall@10
against exact search. "QPS at equal recall" compares, for
each recall target, the fastest setting of each library that reaches it.

Embedding: the same model.onnx and tokenizer.json, mean pooling over the attention mask, batches of the
same size as ours, ONNX Runtime's default threading (as fastembed uses).
"""

import argparse
import json
import struct
import time
from pathlib import Path

import hnswlib
import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

MAGIC = b"MEMVEC01"
TARGETS = (0.80, 0.90, 0.95, 0.99)
K = 10


def read_vectors(path):
    with open(path, "rb") as handle:
        if handle.read(8) != MAGIC:
            raise SystemExit(f"{path}: not a vector file")
        base_count, query_count, dims = struct.unpack("<QQQ", handle.read(24))
        data = np.frombuffer(handle.read(), dtype="<f4")
    if data.size != (base_count + query_count) * dims:
        raise SystemExit(f"{path}: truncated")
    data = data.reshape(base_count + query_count, dims)
    return np.ascontiguousarray(data[:base_count]), np.ascontiguousarray(data[base_count:])


def exact_top(base, queries):
    scores = queries @ base.T
    top = np.argpartition(-scores, K, axis=1)[:, :K]
    return [set(row) for row in top]


def hnswlib_curve(base, queries, truth, efs):
    index = hnswlib.Index(space="ip", dim=base.shape[1])
    index.init_index(max_elements=base.shape[0], ef_construction=200, M=24, random_seed=1)
    started = time.perf_counter()
    index.add_items(base, np.arange(base.shape[0]), num_threads=-1)
    build_seconds = time.perf_counter() - started
    index.set_num_threads(1)
    points = []
    for ef in efs:
        index.set_ef(max(ef, K))
        for query in queries[:5]:
            index.knn_query(query, k=K, num_threads=1)
        found = []
        started = time.perf_counter()
        for query in queries:
            labels, _ = index.knn_query(query, k=K, num_threads=1)
            found.append(set(labels[0]))
        seconds = time.perf_counter() - started
        hits = sum(len(t & f) for t, f in zip(truth, found))
        points.append({"ef": ef, "qps": len(queries) / seconds, "recall_at_10": hits / (K * len(queries))})
    return build_seconds, points


def fastest_at(points, target):
    reaching = [point for point in points if point["recall_at_10"] >= target]
    return max(reaching, key=lambda point: point["qps"]) if reaching else None


def onnx_throughput(assets, texts, batch):
    model = Path(assets) / "model" / "model.onnx"
    tokenizer = Tokenizer.from_file(str(Path(assets) / "model" / "tokenizer.json"))
    tokenizer.enable_truncation(256)
    tokenizer.enable_padding()
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    names = {node.name for node in session.get_inputs()}

    def embed(chunk):
        encodings = tokenizer.encode_batch(chunk)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in names:
            feed["token_type_ids"] = np.zeros_like(ids)
        hidden = session.run(None, feed)[0]
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        return pooled / np.linalg.norm(pooled, axis=1, keepdims=True)

    embed(texts[:batch])
    vectors = []
    started = time.perf_counter()
    for start in range(0, len(texts), batch):
        vectors.append(embed(texts[start:start + batch]))
    seconds = time.perf_counter() - started
    return len(texts) / seconds, np.concatenate(vectors)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", required=True)
    parser.add_argument("--assets", default="assets")
    args = parser.parse_args()
    folder = Path(args.dir)

    base, queries = read_vectors(folder / "vectors.bin")
    ours_hnsw = json.loads((folder / "ours_hnsw.json").read_text())
    ours_embed = json.loads((folder / "ours_embed.json").read_text())
    texts = [line for line in (folder / "texts.txt").read_text().splitlines() if line]

    truth = exact_top(base, queries)
    efs = [point["ef"] for point in ours_hnsw["points"]]
    theirs_build, theirs = hnswlib_curve(base, queries, truth, efs)
    ours = ours_hnsw["points"]

    print(f"HNSW on {base.shape[0]} vectors x {base.shape[1]} dims, {queries.shape[0]} queries, M=24, ef_construction=200")
    print(f"  build seconds: ours {ours_hnsw['build_seconds']:.1f}, hnswlib {theirs_build:.1f} (every core, each)")
    print(f"  {'ef':>5} {'ours QPS':>10} {'ours R@10':>10} {'hnswlib QPS':>12} {'hnswlib R@10':>13}")
    for mine, other in zip(ours, theirs):
        print(f"  {mine['ef']:>5} {mine['qps']:>10.0f} {mine['recall_at_10']:>10.3f} {other['qps']:>12.0f} {other['recall_at_10']:>13.3f}")
    at_equal = []
    for target in TARGETS:
        mine, other = fastest_at(ours, target), fastest_at(theirs, target)
        ratio = mine["qps"] / other["qps"] if mine and other else None
        at_equal.append({"recall_at_10": target, "ours": mine, "hnswlib": other, "ours_over_hnswlib": ratio})
        shown = f"{ratio:.2f}" if ratio is not None else "n/a (a side never reaches it)"
        print(f"  QPS ratio ours/hnswlib at recall@10 >= {target:.2f}: {shown}")

    onnx_rate, onnx_vectors = onnx_throughput(args.assets, texts, ours_embed["batch"])
    ours_rate = ours_embed["texts_per_second"]
    # vectors.bin starts with the real vectors of texts.txt, in order.
    shared = min(len(texts), base.shape[0])
    agreement = float(np.mean(np.sum(onnx_vectors[:shared] * base[:shared], axis=1)))
    print(f"Embedding {len(texts)} texts in batches of {ours_embed['batch']}:")
    print(f"  ours (fastembed) {ours_rate:.0f} texts/s, onnxruntime direct {onnx_rate:.0f} texts/s, ratio ours/onnxruntime {ours_rate / onnx_rate:.2f}")
    print(f"  mean cosine between the two sides' vectors: {agreement:.4f}")

    (folder / "compare.json").write_text(json.dumps({
        "hnsw": {"ours": ours_hnsw, "hnswlib": {"build_seconds": theirs_build, "points": theirs}, "at_equal_recall": at_equal},
        "embedding": {"ours_texts_per_second": ours_rate, "onnxruntime_texts_per_second": onnx_rate,
                      "ratio": ours_rate / onnx_rate, "mean_cosine_agreement": agreement},
    }, indent=2))


if __name__ == "__main__":
    main()
