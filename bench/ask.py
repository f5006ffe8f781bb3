"""The ask pipeline's own cost at 100k chunks: memory load, prompt building and access recording, beside the search.

    .venv/bin/python bench/ask.py                    # 100k chunks, 200 questions
    .venv/bin/python bench/ask.py --n 10000 --queries 500

Uses the cached synthetic database of bench/search.py (built on first use), copied to a temporary file because
recording accesses writes to it. The chat has a memory.md of five sections and a full 20-message window, as after a
capture cycle. The model is `FakeProvider` (no network): what is measured is multis's work around the model.
For each question, in rotating order: the bare `Store.search` (limit 5, a user's scopes), and the whole `ask`
pipeline; plus each step of the pipeline timed on its own.
"""
import argparse, shutil, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import USERS, machine, questions, summary, timed
from search import build, NOW
from multis.answer.ask import ask
from multis.testing.providers import FakeProvider
from multis.memory.chat import ChatMemory
from multis.answer.prompts import build_prompt
from multis.retrieval.store import Store

def chat_memory(home:Path)->ChatMemory:
    "A chat with five memory sections and a 20-message window"
    mem = ChatMemory('bench-chat', home=home)
    for i in range(5): mem.append_memory('\n'.join(f'- fact {i}.{j}: the user mentioned something worth keeping' for j in range(8)), now=NOW - 86400*(5-i))
    for i in range(20): mem.append_message('user' if i % 2 == 0 else 'assistant', f'message {i} ' + 'words ' * 30, now=NOW - 600 + i)
    return mem

def run(n:int, nq:int):
    print(machine())
    src = build(n)
    with tempfile.TemporaryDirectory() as d:
        db = Path(d)/'multis.db'; shutil.copy(src, db)
        st, mem, model = Store(db), chat_memory(Path(d)), FakeProvider(['An answer [f, page 1].'])
        scopes, qs = ['kb', USERS[1]], questions(nq, seed=11)
        for q in qs[:5]: st.search(q, limit=5, scopes=scopes, now=NOW)        # warm caches
        t = {k: [] for k in ('search', 'ask', 'memory load', 'prompt', 'record')}
        for i, q in enumerate(qs):
            now = NOW + i
            def step_search(): t['search'].append(timed(st.search, q, limit=5, scopes=scopes, now=now)[0])
            def step_ask():
                s = time.perf_counter()
                memory, recent = mem.load_memory(), [{'role': m['role'], 'content': m['content']} for m in mem.load_recent()]
                ask(q, st, model, scopes, memory, recent, now=now)
                t['ask'].append(time.perf_counter() - s)
            for f in (step_search, step_ask) if i % 2 == 0 else (step_ask, step_search): f()
            dt, (memory, recent) = timed(lambda: (mem.load_memory(), mem.load_recent()))
            t['memory load'].append(dt)
            hits = st.search(q, limit=5, scopes=scopes, now=now)
            t['prompt'].append(timed(build_prompt, q, hits, memory, recent)[0])
            t['record'].append(timed(st.record_access, [h.chunk_id for h in hits], q, now=now)[0])
        st.close()
    rows = {k: summary(v) for k, v in t.items()}
    print(f"\n{n:,} chunks, {nq} questions, scopes {scopes}, limit 5; times in ms")
    print(f"{'step':<14}{'p50':>9}{'p99':>9}")
    for k, r in rows.items(): print(f"{k:<14}{r['p50']:9.3f}{r['p99']:9.3f}")
    own = rows['memory load']['p50'] + rows['prompt']['p50'] + rows['record']['p50']
    print(f"\npipeline's own work (memory load + prompt + record), sum of p50s: {own:.3f} ms")
    print(f"whole ask p50 minus search p50: {rows['ask']['p50'] - rows['search']['p50']:.3f} ms "
          f"(ask / search p50 = {rows['ask']['p50']/rows['search']['p50']:.2f}x); aim: under 5 ms")

if __name__ == '__main__':
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--n', type=int, default=100_000, help='chunks in the store')
    p.add_argument('--queries', type=int, default=200, help='questions')
    a = p.parse_args()
    run(a.n, a.queries)
