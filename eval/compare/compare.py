"""Compares our HNSW, exact scan and embedding throughput with hnswlib, memory bandwidth and onnxruntime.

Reads what `memory-eval dump-vectors` wrote (vectors.bin, texts.txt, mixed.txt), measures the Python
side in this process and ours through `memory-eval bench-hnsw` and `memory-eval bench-embed` (run from
here, taking turns with the Python side), prints a table on standard error and the summary JSON on
standard output, and writes compare.json (summary and details) next to the inputs.

HNSW: same vectors, same M (24) and ef_construction (200), inner product on unit vectors (= cosine),
the graph built on every core (ours builds in parallel too), one query per call on one thread, top 10
returned, recall@10 against exact search. Each row is one search width on both sides: hnswlib's
`set_ef(ef)`, our `ef_search = ef`. The two sides take turns, `--rounds` times (each round builds its
graph and times every row with the same number of passes); at each row, each side's fastest pass of
any round counts, with that round's recall, and each side's fastest build. On this shared machine a
single run's QPS swings by a fifth from minute to minute (the ratio at 0.95 read 0.88 and 1.25 in two
one-round runs half an hour apart, with nearly the same code), so one round decided the headline by
when it ran. The QPS at recall@10 0.95 of each side is interpolated linearly between the two rows
around 0.95 (the slowest row already past it when none is below).

Exact scan: bytes our scan reads per second (vectors x dims x 4 x QPS) over the single-thread read
bandwidth bench-hnsw measured in the same run on a buffer of the same size (the round with the
highest share counts).

Embedding: the same model.onnx and tokenizer.json, mean pooling over the attention mask, and the
same model calls as ours: texts come in calls of `batch` (as our indexer makes them), each call is
ordered by token count and cut into model calls of at most `batch` texts and `max_batch_tokens`
padded tokens, and ONNX Runtime keeps its default threading (as fastembed does). The two sides take
turns, `--rounds` times on each set, and each side's best round counts, so load from other processes
weighs on both alike. Plain batches in input order are timed once, for reference.

Sync: `memory sync` (the binary) of mixed.jsonl, the mixed-length set as an import file, against our
embedder alone on exactly the texts that sync embeds; see `sync_comparison`.
"""

import argparse
import json
import os
import statistics
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import hnswlib
import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

MAGIC = b"MEMVEC01"
TARGETS = (0.80, 0.90, 0.95, 0.99)
HEADLINE_RECALL = 0.95
K = 10
MAX_LENGTH = 256


def log(*parts):
    print(*parts, file=sys.stderr)


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


def ours_hnsw_round(eval_binary, path):
    result = subprocess.run([eval_binary, "bench-hnsw", "--vectors", str(path)],
                            check=True, stdout=subprocess.PIPE, text=True)
    return json.loads(result.stdout)


def fastest_points(rounds):
    """Each row's fastest point over rounds of the same rows (its recall from the same round)."""
    return [max(row, key=lambda point: point["qps"]) for row in zip(*rounds)]


def hnswlib_curve(base, queries, truth, efs, m, ef_construction, passes):
    index = hnswlib.Index(space="ip", dim=base.shape[1])
    index.init_index(max_elements=base.shape[0], ef_construction=ef_construction, M=m, random_seed=1)
    started = time.perf_counter()
    index.add_items(base, np.arange(base.shape[0]), num_threads=-1)
    build_seconds = time.perf_counter() - started
    index.set_num_threads(1)
    points = []
    for ef in efs:
        index.set_ef(max(ef, K))
        for query in queries[:5]:
            index.knn_query(query, k=K, num_threads=1)
        best = float("inf")
        for _ in range(passes):
            found = []
            seconds = 0.0
            for query in queries:
                started = time.perf_counter()
                labels, _ = index.knn_query(query, k=K, num_threads=1)
                seconds += time.perf_counter() - started
                found.append(set(labels[0]))
            best = min(best, seconds)
        seconds = best
        hits = sum(len(t & f) for t, f in zip(truth, found))
        points.append({"ef": ef, "qps": len(queries) / seconds, "recall_at_10": hits / (K * len(queries))})
    return build_seconds, points


def qps_at_recall(points, target):
    """QPS at `target` recall, interpolated between the rows around it (in search-width order)."""
    ordered = sorted(points, key=lambda point: point["ef"])
    if not ordered or max(point["recall_at_10"] for point in ordered) < target:
        return None
    if ordered[0]["recall_at_10"] >= target:
        return ordered[0]["qps"]
    for below, above in zip(ordered, ordered[1:]):
        low, high = below["recall_at_10"], above["recall_at_10"]
        if low < target <= high:
            share = (target - low) / (high - low)
            return below["qps"] + share * (above["qps"] - below["qps"])
    return max(point["qps"] for point in ordered if point["recall_at_10"] >= target)


class OnnxEmbedder:
    def __init__(self, assets):
        model = Path(assets) / "model" / "model.onnx"
        self.tokenizer = Tokenizer.from_file(str(Path(assets) / "model" / "tokenizer.json"))
        self.tokenizer.enable_truncation(MAX_LENGTH)
        self.tokenizer.no_padding()
        self.session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
        self.names = {node.name for node in self.session.get_inputs()}

    def run(self, encodings):
        longest = max(len(encoding.ids) for encoding in encodings)
        ids = np.zeros((len(encodings), longest), dtype=np.int64)
        mask = np.zeros((len(encodings), longest), dtype=np.int64)
        for row, encoding in enumerate(encodings):
            ids[row, : len(encoding.ids)] = encoding.ids
            mask[row, : len(encoding.ids)] = 1
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self.names:
            feed["token_type_ids"] = np.zeros_like(ids)
        hidden = self.session.run(None, feed)[0]
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        return pooled / np.linalg.norm(pooled, axis=1, keepdims=True)

    def embed_call(self, texts, batch, max_tokens, ordered):
        encodings = self.tokenizer.encode_batch(texts)
        if not ordered:
            return np.concatenate([self.run(encodings[start:start + batch])
                                   for start in range(0, len(encodings), batch)])
        order = sorted(range(len(encodings)), key=lambda index: len(encodings[index].ids))
        groups, start = [], 0
        for end in range(len(order)):
            count = end + 1 - start
            if end > start and (count > batch or count * len(encodings[order[end]].ids) > max_tokens):
                groups.append(order[start:end])
                start = end
        if start < len(order):
            groups.append(order[start:])
        rows = [None] * len(texts)
        for group in groups:
            for index, vector in zip(group, self.run([encodings[index] for index in group])):
                rows[index] = vector
        return np.stack(rows)

    def throughput(self, texts, batch, max_tokens, ordered):
        self.embed_call(texts[:batch], batch, max_tokens, ordered)
        vectors = []
        started = time.perf_counter()
        for start in range(0, len(texts), batch):
            vectors.append(self.embed_call(texts[start:start + batch], batch, max_tokens, ordered))
        seconds = time.perf_counter() - started
        return len(texts) / seconds, np.concatenate(vectors)


def read_texts(path):
    return [line for line in path.read_text().splitlines() if line]


def ours_embed(eval_binary, path):
    result = subprocess.run([eval_binary, "bench-embed", "--texts", str(path)],
                            check=True, stdout=subprocess.PIPE, text=True)
    return json.loads(result.stdout)


def mib(size):
    return "n/a" if size is None else f"{size / 2**20:.0f} MiB"


def timed_child(command, env=None):
    """Wall seconds, peak RSS bytes and standard output of one child process.

    The peak is the child's VmHWM, read from /proc every 20 ms until it exits (the last reading
    before it is reaped counts). wait4's ru_maxrss would not do: Linux carries the forking process's
    peak across exec, and this process holds the vectors and an ONNX Runtime session."""
    started = time.perf_counter()
    child = subprocess.Popen([str(part) for part in command], stdout=subprocess.PIPE, env=env)
    peak = [0]
    exited = threading.Event()

    def sample():
        status = Path(f"/proc/{child.pid}/status")
        while not exited.is_set():
            try:
                for line in status.read_text().splitlines():
                    if line.startswith("VmHWM:"):
                        peak[0] = max(peak[0], int(line.split()[1]) * 1024)
            except OSError:
                pass
            exited.wait(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    out = child.stdout.read()
    # Waits for the exit without reaping, so the sampler never reads a reused pid.
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)
    seconds = time.perf_counter() - started
    exited.set()
    sampler.join()
    if child.wait() != 0:
        raise SystemExit(f"{command[0]} {command[1:]} exited with {child.returncode}")
    return seconds, peak[0] or None, out.decode()


def sync_comparison(memory, eval_binary, folder, rounds, env):
    """`memory sync` of the mixed-length import against the embedder alone on the texts it embeds.

    Each round imports mixed.jsonl into a fresh store with `memory import`, times `memory sync` (wall
    time of the process: start, model load, reading, chunking, embedding, writing every vector), then
    times `memory-eval bench-embed` on the texts that sync embedded (`memory-eval sync-texts`: every
    chunk with its speaker). The ratio is the median over rounds of the sync's wall time over the
    embedder's embedding time in the same round (the two run back to back, so a change in the
    machine's load falls on both; this machine's embedding rounds varied by a third); the best over
    the best is kept beside it. Peak RSS is each process's own."""
    texts_file = folder / "sync_texts.txt"
    subprocess.run([str(eval_binary), "sync-texts", "--import", str(folder / "mixed.jsonl"),
                    "--out", str(texts_file)], check=True, env=env)
    syncs, embeds = [], []
    for _ in range(max(rounds, 1)):
        store = folder / "sync.sqlite"
        for suffix in ("", "-wal", "-shm"):
            Path(f"{store}{suffix}").unlink(missing_ok=True)
        subprocess.run([str(memory), "--db", str(store), "import", str(folder / "mixed.jsonl")],
                       check=True, stdout=subprocess.DEVNULL, env=env)
        seconds, rss, out = timed_child([memory, "--db", store, "sync", "{}"], env)
        syncs.append({"seconds": seconds, "peak_rss_bytes": rss, "answer": out.strip()})
        _, rss, out = timed_child([eval_binary, "bench-embed", "--texts", texts_file], env)
        embed = json.loads(out)
        embeds.append({"seconds": embed["seconds"], "peak_rss_bytes": rss,
                       "texts": embed["texts"], "batch": embed["batch"],
                       "max_batch_tokens": embed["max_batch_tokens"]})
    sync_best = min(round["seconds"] for round in syncs)
    embed_best = min(round["seconds"] for round in embeds)
    return {
        "documents": len(read_texts(folder / "mixed.txt")),
        "embedded_texts": embeds[0]["texts"],
        "rounds": len(syncs),
        "sync_seconds": sync_best,
        "sync_peak_rss_bytes": max((round["peak_rss_bytes"] or 0) for round in syncs) or None,
        "embed_seconds": embed_best,
        "embed_peak_rss_bytes": max((round["peak_rss_bytes"] or 0) for round in embeds) or None,
        "ratio": statistics.median(sync["seconds"] / embed["seconds"]
                                   for sync, embed in zip(syncs, embeds)),
        "best_over_best_ratio": sync_best / embed_best,
        "sync_rounds": syncs,
        "embed_rounds": embeds,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", required=True)
    parser.add_argument("--assets", default="assets")
    parser.add_argument("--eval", required=True, help="the memory-eval binary")
    parser.add_argument("--memory", required=True, help="the memory binary")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    folder = Path(args.dir)

    base, queries = read_vectors(folder / "vectors.bin")
    texts = read_texts(folder / "texts.txt")
    mixed = read_texts(folder / "mixed.txt")

    truth = exact_top(base, queries)
    our_rounds, hnswlib_rounds = [], []
    for _ in range(max(args.rounds, 1)):
        our_rounds.append(ours_hnsw_round(args.eval, folder / "vectors.bin"))
        first = our_rounds[0]
        efs = [point["ef"] for point in first["points"]]
        m, ef_construction = first["params"]["M"], first["params"]["ef_construction"]
        # As many passes per row as ours makes, the fastest counting on both sides.
        passes = first.get("query_passes", 1)
        hnswlib_rounds.append(hnswlib_curve(base, queries, truth, efs, m, ef_construction, passes))
    (folder / "ours_hnsw.json").write_text(json.dumps(our_rounds, indent=2))
    ours_hnsw = dict(max(our_rounds, key=lambda round: round["exact_scan"]["share"]))
    ours_hnsw["build_seconds"] = min(round["build_seconds"] for round in our_rounds)
    ours_hnsw["points"] = ours = fastest_points([round["points"] for round in our_rounds])
    ours_hnsw["rounds"] = len(our_rounds)
    theirs_build = min(build for build, _ in hnswlib_rounds)
    theirs = fastest_points([points for _, points in hnswlib_rounds])

    log(f"HNSW on {base.shape[0]} vectors x {base.shape[1]} dims, {queries.shape[0]} queries, "
        f"M={m}, ef_construction={ef_construction}, kernel {ours_hnsw.get('kernel')}")
    log(f"  build seconds: ours {ours_hnsw['build_seconds']:.2f}, hnswlib {theirs_build:.2f} "
        f"(every core, each; fastest of {len(our_rounds)} rounds, taking turns)")
    log(f"  {'ef':>5} {'ours QPS':>10} {'ours R@10':>10} {'hnswlib QPS':>12} {'hnswlib R@10':>13}")
    for mine, other in zip(ours, theirs):
        log(f"  {mine['ef']:>5} {mine['qps']:>10.0f} {mine['recall_at_10']:>10.3f} "
            f"{other['qps']:>12.0f} {other['recall_at_10']:>13.3f}")
    at_recall = []
    for target in TARGETS:
        mine, other = qps_at_recall(ours, target), qps_at_recall(theirs, target)
        ratio = mine / other if mine and other else None
        at_recall.append({"recall_at_10": target, "ours_qps": mine, "hnswlib_qps": other,
                          "ours_over_hnswlib": ratio})
        shown = f"{ratio:.2f}" if ratio is not None else "n/a (a side never reaches it)"
        log(f"  interpolated QPS ratio ours/hnswlib at recall@10 {target:.2f}: {shown}")
    headline = next(row["ours_over_hnswlib"] for row in at_recall if row["recall_at_10"] == HEADLINE_RECALL)

    scan = ours_hnsw["exact_scan"]
    log(f"Exact scan: {scan['bytes_per_second'] / 1e9:.1f} GB/s read, memory read bandwidth "
        f"{scan['memory_read_bytes_per_second'] / 1e9:.1f} GB/s (same buffer size, one thread): "
        f"share {scan['share']:.2f}")

    onnx = OnnxEmbedder(args.assets)
    embedding = {}
    for name, file in (("eval_texts", "texts.txt"), ("mixed_length", "mixed.txt")):
        corpus = texts if name == "eval_texts" else mixed
        mine_rounds, their_rounds, vectors = [], [], None
        for _ in range(max(args.rounds, 1)):
            mine_rounds.append(ours_embed(args.eval, folder / file))
            mine = mine_rounds[-1]
            rate, vectors = onnx.throughput(corpus, mine["batch"], mine["max_batch_tokens"], ordered=True)
            their_rounds.append(rate)
        (folder / f"ours_embed_{name}.json").write_text(json.dumps(mine_rounds, indent=2))
        batch, max_tokens = mine["batch"], mine["max_batch_tokens"]
        plain_rate, _ = onnx.throughput(corpus, batch, max_tokens, ordered=False)
        ours_rate, rate = max(m["texts_per_second"] for m in mine_rounds), max(their_rounds)
        embedding[name] = {
            "texts": len(corpus),
            "batch": batch,
            "max_batch_tokens": max_tokens,
            "rounds": len(mine_rounds),
            "ours_texts_per_second": ours_rate,
            "ours_rounds_texts_per_second": [m["texts_per_second"] for m in mine_rounds],
            "ours_peak_rss_bytes": max(m.get("peak_rss_bytes") or 0 for m in mine_rounds) or None,
            "onnxruntime_texts_per_second": rate,
            "onnxruntime_rounds_texts_per_second": their_rounds,
            "onnxruntime_input_order_texts_per_second": plain_rate,
            "ratio": ours_rate / rate,
        }
        if name == "eval_texts":
            # vectors.bin starts with the real vectors of texts.txt, in order.
            shared = min(len(corpus), base.shape[0])
            embedding[name]["mean_cosine_agreement"] = float(
                np.mean(np.sum(vectors[:shared] * base[:shared], axis=1)))
        log(f"Embedding {name} ({len(corpus)} texts, calls of {batch}, <= {max_tokens} padded tokens per model call):")
        log(f"  ours {ours_rate:.0f} texts/s, onnxruntime direct {rate:.0f} texts/s "
            f"(input-order batches {plain_rate:.0f}), ratio {embedding[name]['ratio']:.2f}, "
            f"best of {len(mine_rounds)} rounds each; our peak RSS {embedding[name]['ours_peak_rss_bytes']}")
    log(f"  mean cosine between the two sides' vectors: {embedding['eval_texts']['mean_cosine_agreement']:.4f}")

    env = dict(os.environ, MEMORY_ASSETS_DIR=str(Path(args.assets).resolve()))
    sync = sync_comparison(args.memory, args.eval, folder, args.rounds, env)
    log(f"memory sync of {sync['documents']} mixed-length documents ({sync['embedded_texts']} texts embedded): "
        f"best {sync['sync_seconds']:.1f} s, peak RSS {mib(sync['sync_peak_rss_bytes'])}; the embedder alone "
        f"on the same texts best {sync['embed_seconds']:.1f} s, peak RSS {mib(sync['embed_peak_rss_bytes'])}; "
        f"ratio {sync['ratio']:.2f} (median of {sync['rounds']} rounds; best over best "
        f"{sync['best_over_best_ratio']:.2f})")

    summary = {
        "hnsw_qps_ratio_at_recall_0.95": headline,
        "hnsw_build_time_ratio": ours_hnsw["build_seconds"] / theirs_build,
        "exact_scan_bandwidth_share": scan["share"],
        "embed_throughput_ratio": {name: figures["ratio"] for name, figures in embedding.items()},
        "sync_embed_time_ratio": sync["ratio"],
        "sync_peak_rss_bytes": sync["sync_peak_rss_bytes"],
    }
    (folder / "compare.json").write_text(json.dumps({
        "summary": summary,
        "hnsw": {"ours": ours_hnsw,
                 "hnswlib": {"build_seconds": theirs_build, "points": theirs,
                             "rounds": [{"build_seconds": build, "points": points}
                                        for build, points in hnswlib_rounds]},
                 "at_recall": at_recall},
        "exact_scan": scan,
        "embedding": embedding,
        "sync": sync,
    }, indent=2))
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
