"Shared helpers of the benchmarks: the machine, timing, and synthetic Zipf text laid out like real documents"
import os, platform, sqlite3, time
from pathlib import Path
import numpy as np
from multis.core import DocChunk

BENCH = Path(__file__).resolve().parent
CACHE = BENCH/'.cache'
GEN_VERSION = 1          # bump when the generator changes: cached databases are rebuilt
VOCAB, ZIPF_S = 50_000, 1.1
USERS = [f'user:{1000+i}' for i in range(8)]
STOP = 'what is the of a to in how does do which for and are on with about can why when should'.split()

def machine()->str:
    "One line about the machine the figures come from"
    cpu = platform.processor() or platform.machine()
    try: cpu = next(l.split(':', 1)[1].strip() for l in open('/proc/cpuinfo') if l.startswith('model name'))
    except (OSError, StopIteration): pass
    return (f"{platform.platform()} | {cpu} | {os.cpu_count()} cpus | Python {platform.python_version()} | "
            f"SQLite {sqlite3.sqlite_version}")

def vocabulary(n:int=VOCAB, seed:int=7)->list:
    "n distinct pseudo-words of 2-4 consonant-vowel syllables (no English stopword among them)"
    rng, words, seen = np.random.default_rng(seed), [], set()
    cons, vows = list('bdfgklmnprtvz'), list('aiou')
    while len(words) < n:
        k = rng.integers(2, 5)
        w = ''.join(cons[c] + vows[v] for c, v in zip(rng.integers(0, len(cons), k), rng.integers(0, len(vows), k)))
        if w not in seen: seen.add(w); words.append(w)
    return words

def zipf_p(n:int=VOCAB, s:float=ZIPF_S)->np.ndarray:
    "Zipf probabilities of ranks 1..n"
    p = np.arange(1, n+1, dtype=np.float64) ** -s
    return p / p.sum()

class Zipf:
    "Draws words (or word ids) with a Zipf distribution over a pseudo-word vocabulary"
    def __init__(self, seed:int=0, n:int=VOCAB, s:float=ZIPF_S):
        self.words, self.cdf = vocabulary(n), np.cumsum(zipf_p(n, s))
        self.rng = np.random.default_rng(seed)
    def ids(self, k:int)->np.ndarray: return np.minimum(np.searchsorted(self.cdf, self.rng.random(k)), len(self.cdf)-1)
    def text(self, k:int)->str: return ' '.join([self.words[i] for i in self.ids(k).tolist()])

def scope_of(file_no:int, rng)->str:
    "Scopes as in real use: most files kb, some admin, a few per user"
    r = rng.random()
    return 'kb' if r < 0.8 else 'admin' if r < 0.9 else USERS[int(rng.integers(len(USERS)))]

def synthetic_chunks(n:int, seed:int=0, per_file:int=20, min_words:int=100, max_words:int=300):
    "Yield n DocChunks of Zipf text (100-300 words), 20 sections per file, each file in one scope"
    z, scope, title = Zipf(seed), 'kb', ''
    for i in range(n):
        if i % per_file == 0: scope, title = scope_of(i // per_file, z.rng), z.text(3).title()
        name = z.text(int(z.rng.integers(2, 5))).capitalize()
        yield DocChunk(f'/docs/f{i // per_file:07d}.md', name, z.text(int(z.rng.integers(min_words, max_words+1))) + '.',
                       section_path=[title, name], section_level=2, document_type='md', scope=scope)

def questions(n:int, seed:int=1, min_terms:int=2, max_terms:int=8)->list:
    "Questions of 2-8 Zipf terms mixed with stopwords, like 'what is the bako of tirumi?'"
    z, qs = Zipf(seed), []
    for _ in range(n):
        terms = [z.words[i] for i in z.ids(int(z.rng.integers(min_terms, max_terms+1))).tolist()]
        words = [w for t in terms for w in ([STOP[int(z.rng.integers(len(STOP)))]] if z.rng.random() < 0.6 else []) + [t]]
        qs.append(' '.join(words) + '?')
    return qs

def pct(xs:list, q:float)->float:
    "The q-th percentile (0-100) of xs, nearest rank"
    s = sorted(xs)
    return s[min(len(s)-1, max(0, int(round(q/100*len(s) + 0.5)) - 1))]

def summary(times:list)->dict:
    "p50 and p99 in milliseconds and queries per second of a list of durations in seconds"
    return dict(p50=pct(times, 50)*1e3, p99=pct(times, 99)*1e3, qps=len(times)/sum(times), n=len(times))

def timed(f, *args, **kw):
    "(seconds, result) of one call"
    t = time.perf_counter(); r = f(*args, **kw)
    return time.perf_counter() - t, r
