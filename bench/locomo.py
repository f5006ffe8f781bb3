"""LoCoMo memory retrieval: is a question's evidence turn in the top k when it is searched in its chat's scope?

    .venv/bin/python bench/locomo.py                     # tune (0-4) and report (5-9) splits, ~2.5 min
    .venv/bin/python bench/locomo.py --split tune        # conversations 0 to 4 only (~1 min)
    .venv/bin/python bench/locomo.py --conversations 0,1 # any conversations
    .venv/bin/python bench/locomo.py --no-semantic       # without the hybrid runs

Reads ../shared/eval/locomo/locomo10.json (never copied into the repo). Each conversation becomes one chat
(`locomo-<i>`, scope `user:locomo-<i>`), all of them in one database: its turns go through `log_message` with
`memory.index_raw` on, `now` = the session's date plus a minute a turn and `speaker` = the speaker's name. Each question
of categories 1-4 is then searched as a non-owner chat would search (`scopes=['kb', 'user:locomo-<i>']`,
`record=False`); a hit from another chat fails the run. Evidence Recall@k (the share of a question's evidence turns in
the top k) and hit@k (at least one of them in the top k) are averaged over questions, overall and per category.

Beside it, in the same run: plain per-conversation FTS5 tables of the turns (text; speaker + text), and other ways
`index_message` could store a turn (the day in words, the previous messages as context in the content or in
section_path, image captions, the next message), each in its own database and searched with the same `Store.search`;
H is what multis stored before the next message joined the breadcrumb (J, today). Then the same questions scored by
coarser units, as published memory figures are: sessions and six-turn windows (turns 1-6, 7-12... of a session),
both taken from multis's turn ranking and indexed as units of their own; two boosts tried on today's top 100 and
dropped (`tried:` rows: the turns of a day, month or year the question names, or of the one speaker it names, score
x1.25-x2, beside the same top 100 unboosted); and the cost of the breadcrumb update
(`log_message` with and without it, interleaved). The variants were
explored on conversations 0-4 only; conversations 5-9 are the report. The report split's rows that are search options
are computed again through `multis.workbench.variants` (the API of the LoCoMo notebook; metrics by ranx) and printed
beside this run's. Local time is set to UTC so that log files, stamps
and days are the sessions' own dates.

Hybrid search (on by default when the packaged model loads; `--no-semantic` skips it): the chunks multis stores today
are embedded with `LocalEmbedder` (all-MiniLM-L6-v2; vectors cached in bench/.cache/ by text, so reruns embed nothing
new) and asked again with `embedder=` at vector weights 0.1-0.9 and 1 (vector only); the weight is chosen on
conversations 0-4 and reported on 5-9, beside BM25 on the same store. `--model FOLDER` makes the hybrid runs use
another sentence-transformers model kept in a local folder (cached by its name), with the packaged model's default
hybrid beside it in the same run.
"""
import argparse, calendar, copy, json, os, re, sqlite3, sys, tempfile, time
import numpy as np
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import CACHE, machine
from multis.core import DocChunk
from multis.config import DEFAULT_CONFIG
from multis.memory.chat import ChatMemory, chat_scope, _stamp
from multis.memory.capture import log_message, day_words, CONTEXT_GAP, CONTEXT_WORDS
from multis.retrieval.ranking import DEFAULTS
from multis.retrieval.search import fts_query, query_terms
from multis.retrieval.store import Store, FTS_TOKENIZE, text_hash
from multis.retrieval.embed import Embedder, EmbeddingError, LocalEmbedder
from multis.retrieval.vectors import embed_pending

os.environ['TZ'] = 'UTC'   # local time = UTC: log files, stamps and days are the sessions' own dates
if hasattr(time, 'tzset'): time.tzset()

LOCOMO = Path(__file__).resolve().parents[2]/'shared'/'eval'/'locomo'/'locomo10.json'
CATS = {1: 'multi-hop', 2: 'temporal', 3: 'open-domain', 4: 'single-hop'}
KS = (1, 5, 10)
SPLITS = {'tune': range(0, 5), 'report': range(5, 10), 'all': range(0, 10)}
TURN_GAP = 60.0   # seconds between two turns of a session

# ---------------------------------------------------------------- data

@dataclass
class Turn:
    dia_id:str; session:int; ts:float; speaker:str; text:str; caption:str=''

@dataclass
class Question:
    text:str; category:int; evidence:list

@dataclass
class Conv:
    idx:int; sample_id:str; turns:list=field(default_factory=list); questions:list=field(default_factory=list)
    dropped:tuple=(0, 0)  # (evidence ids naming no turn, questions left without evidence)

def session_time(s:str)->float:
    "'1:56 pm on 8 May, 2023' as seconds since the epoch (UTC)"
    return datetime.strptime(s.strip(), '%I:%M %p on %d %B, %Y').timestamp()

def clean_evidence(ev:list)->list:
    "Evidence ids cleaned: 'D8:6; D9:17' split, 'D:11:26' and 'D30:05' fixed, repeats dropped"
    return list(dict.fromkeys(re.sub(r'^D:?(\d+):0*(\d+)$', r'D\1:\2', e) for x in ev for e in re.split(r'[;\s]+', x) if e))

def load_conv(idx:int, d:dict)->Conv:
    "One conversation: its turns in order with their times, and its questions of categories 1-4"
    c = d['conversation']
    cv = Conv(idx, d['sample_id'])
    for n in sorted(int(m[1]) for k in c if (m := re.fullmatch(r'session_(\d+)', k))):
        t0 = session_time(c[f'session_{n}_date_time'])
        cv.turns += [Turn(t['dia_id'], n, t0 + i*TURN_GAP, t['speaker'], t['text'], t.get('blip_caption', ''))
                     for i, t in enumerate(c[f'session_{n}'])]
    known, qs = {t.dia_id for t in cv.turns}, [q for q in d['qa'] if q['category'] in CATS]
    cleaned = [clean_evidence(q.get('evidence', [])) for q in qs]
    evs = [[e for e in ev if e in known] for ev in cleaned]
    cv.questions = [Question(q['question'], q['category'], ev) for q, ev in zip(qs, evs) if ev]
    cv.dropped = (sum(map(len, cleaned)) - sum(map(len, evs)), len(qs) - len(cv.questions))
    return cv

def load(path:Path)->list:
    "Every conversation of locomo10.json"
    return [load_conv(i, d) for i, d in enumerate(json.loads(path.read_text(encoding='utf-8')))]

# ---------------------------------------------------------------- other ways a turn could become a chunk

CFG = copy.deepcopy(DEFAULT_CONFIG)
CFG['memory']['index_raw'] = True
S = 'section_path'

def chat_id(cv:Conv)->str: return f"locomo-{cv.idx}"

@dataclass
class Variant:
    "One way of storing a turn"
    label:str
    path:str='alt'         # 'today': log_message -> index_message, checked; 'raw': log_message alone; 'alt': alt_chunk only
    date:bool=False        # the day in words in the name ('Caroline, 8 May 2023, 13:56')
    prev:int=0             # previous messages (of the last CONTEXT_GAP seconds) stored as context
    prev_col:str='content' # where that context goes: 'content' or 'section_path'
    ctx_speaker:bool=False # context messages start with their speaker's name
    ctx_words:int=0        # context messages cut to their first n words (0: whole)
    own_last:bool=False    # section_path ends with the message's own name
    caption:bool=False     # the shared image's caption after the text (LoCoMo's blip_caption)
    nxt:int=0              # the following messages as context too (unknown at indexing time: an upper bound)
    selectable:bool=True   # something index_message could do from what a chat gives it

def own_text(t:Turn, v:Variant)->str:
    "The turn's text, with its image's caption if the variant stores it"
    return f"{t.text} [image: {t.caption}]" if v.caption and t.caption else t.text

def context(turns:list, i:int, v:Variant)->list:
    "The messages around turn i that this variant stores with it"
    near = lambda j: abs(turns[i].ts - turns[j].ts) <= CONTEXT_GAP
    around = [j for j in range(max(0, i - v.prev), min(len(turns), i + 1 + v.nxt)) if j != i and near(j)]
    cut = lambda s: ' '.join(s.split()[:v.ctx_words]) if v.ctx_words else s
    return [(f"{turns[j].speaker}: " if v.ctx_speaker else '') + cut(own_text(turns[j], v)) for j in around]

def alt_chunk(mem:ChatMemory, t:Turn, ctx:list, v:Variant)->DocChunk:
    "The chunk another `index_message` would store for turn t"
    body = f"{t.speaker}: {own_text(t, v)}"
    if ctx and v.prev_col == 'content': body += '\n\n' + '\n'.join(f"(context) {c}" for c in ctx)
    name = f"{t.speaker}, {day_words(t.ts)}, {time.strftime('%H:%M', time.localtime(t.ts))}" if v.date else f"{t.speaker} {_stamp(t.ts)}"
    sec = (ctx if v.prev_col == S else []) + ([name] if v.own_last else [])
    return DocChunk(str(mem.log_path(t.ts)), name, body, element_type='paragraph', section_path=sec, document_type='conversation',
                    scope=mem.scope, metadata={'chat_id': mem.chat_id, 'role': 'user', 'speaker': t.speaker, 'ts': t.ts})

def newest(store:Store)->tuple:
    "(rows, chunk_id of the newest row)"
    return store.conn.execute('SELECT count(*), (SELECT chunk_id FROM chunks ORDER BY id DESC LIMIT 1) FROM chunks').fetchone()

def index_turn(store:Store, mem:ChatMemory, cv:Conv, i:int, v:Variant)->tuple:
    "(window length, chunk id) after sending turn i through the chat's memory the variant's way"
    t = cv.turns[i]
    if v.path == 'raw':            # log_message alone (index_cost)
        return log_message(mem, 'user', t.text, store, CFG, now=t.ts, speaker=t.speaker), newest(store)[1]
    if v.path == 'today':
        rows = newest(store)[0]
        n = log_message(mem, 'user', t.text, store, CFG, now=t.ts, speaker=t.speaker)
        after, cid = newest(store)
        assert after == rows + 1, f"{t.dia_id}: index_message overwrote an earlier chunk"
        hv, jv = Variant('H', **_H), Variant('J', **_H, nxt=1)
        want, got = alt_chunk(mem, t, context(cv.turns, i, hv), hv), store.get(cid)
        assert (cid, got.section_path) == (want.chunk_id, want.section_path), "alt_chunk H no longer rebuilds index_message's new chunk"
        if i:   # the message before, given this one as the next message of its breadcrumb
            want, got = alt_chunk(mem, cv.turns[i-1], context(cv.turns, i-1, jv), jv), store.get(alt_chunk(mem, cv.turns[i-1], [], jv).chunk_id)
            assert got.section_path == want.section_path, "alt_chunk J no longer rebuilds the chunk of the message before"
        return n, cid
    c = alt_chunk(mem, t, context(cv.turns, i, v), v)   # the chat's files play no part in what gets indexed
    store.save([c])
    return 0, c.chunk_id

def feed(store:Store, home:Path, cv:Conv, v:Variant)->dict:
    "Send the conversation's turns through the chat's memory in order; chunk_id -> dia_id of what got indexed"
    mem, ids, keep = ChatMemory(chat_id(cv), home=home), {}, CFG['memory']['recent_window']
    for i, t in enumerate(cv.turns):
        n, cid = index_turn(store, mem, cv, i, v)
        assert cid not in ids, f"{t.dia_id}: chunk id of an earlier turn"
        ids[cid] = t.dia_id
        if n >= 2*keep: mem.trim_recent(keep)   # Conversation trims at keep + 1; every 20 turns is enough here
    return ids

# ---------------------------------------------------------------- asking and scoring

def ask_hits(store:Store, cv:Conv, ids:dict, weights=DEFAULTS['bm25_weights'], record:bool=False, limit:int=max(KS), **kw)->list:
    "Each question's top 10 (`limit`) hits, searched as a non-owner chat; no hit may come from another chat"
    scope, now = chat_scope(chat_id(cv)), cv.turns[-1].ts + 86400
    out = []
    for j, q in enumerate(cv.questions):
        hits = store.search(q.text, limit=limit, scopes=['kb', scope], bm25_weights=weights, record=record, now=now + j*60, **kw)
        assert all(h.scope == scope and h.chunk_id in ids for h in hits), f"{cv.sample_id}: a hit from outside the chat"
        out.append(hits)
    return out

def ask(store:Store, cv:Conv, ids:dict, **kw)->list:
    "The dia_ids of each question's top hits (`ask_hits`)"
    return [[ids[h.chunk_id] for h in hits] for hits in ask_hits(store, cv, ids, **kw)]

def bare_ranked(cv:Conv, speaker:bool)->list:
    "The baseline: the turns of one conversation in a plain FTS5 table, the question's terms ORed, bm25 order"
    db = sqlite3.connect(':memory:')
    db.execute(f"CREATE VIRTUAL TABLE t USING fts5(content, tokenize='{FTS_TOKENIZE}')")
    db.executemany('INSERT INTO t(rowid, content) VALUES (?, ?)',
                   [(i, f"{t.speaker}: {t.text}" if speaker else t.text) for i, t in enumerate(cv.turns)])
    sql, out = f'SELECT rowid FROM t WHERE t MATCH ? ORDER BY bm25(t) LIMIT {max(KS)}', []
    for q in cv.questions:
        terms = query_terms(q.text)
        out.append([cv.turns[r].dia_id for (r,) in db.execute(sql, (fts_query(terms),))] if terms else [])
    db.close()
    return out

def question_scores(ranked:list, evidence:list)->dict:
    "Recall@k (share of the evidence in the top k) and hit@k (any of it in the top k) of one question"
    ev = set(evidence)
    return {**{f'R@{k}': len(ev & set(ranked[:k])) / len(ev) for k in KS}, **{f'hit@{k}': float(bool(ev & set(ranked[:k]))) for k in KS}}

def score_rows(convs:list, ranked:dict)->list:
    "(conversation, category, scores) of each question; `ranked`: conversation -> each question's dia_ids"
    return [(cv.idx, q.category, question_scores(r, q.evidence)) for cv in convs for q, r in zip(cv.questions, ranked[cv.idx])]

def mean(rows:list, convs, cat:int|None=None)->dict:
    "Averages over the questions of these conversations (and category); n = how many"
    sel = [s for i, c, s in rows if i in convs and (cat is None or c == cat)]
    return {'n': len(sel), **{k: sum(s[k] for s in sel) / len(sel) for k in sel[0]}} if sel else {'n': 0}

# ---------------------------------------------------------------- running the variants

@contextmanager
def working_dir(path:Path):
    "Run the block inside `path`"
    old = os.getcwd()
    os.chdir(path)
    try: yield
    finally: os.chdir(old)

def build(convs:list, v:Variant, tmp:Path, per_chat_db:bool=False)->tuple:
    "({conversation: store}, {conversation: {chunk_id: dia_id}}, seconds): every chat in one database (or one each)"
    d = Path(tempfile.mkdtemp(dir=tmp))
    one = None if per_chat_db else Store(d/'multis.db')
    stores = {cv.idx: one or Store(d/f'multis{cv.idx}.db') for cv in convs}
    t = time.perf_counter()
    with working_dir(d):  # a relative home: chunk ids (made from the log's path) are the same in every run
        ids = {cv.idx: feed(stores[cv.idx], Path('home'), cv, v) for cv in convs}
    return stores, ids, time.perf_counter() - t

def ask_all(convs:list, stores:dict, ids:dict, **kw)->tuple:
    "(score rows, seconds) of every question of these conversations"
    t = time.perf_counter()
    ranked = {cv.idx: ask(stores[cv.idx], cv, ids[cv.idx], **kw) for cv in convs}
    return score_rows(convs, ranked), time.perf_counter() - t

def run(convs:list, v:Variant, tmp:Path, per_chat_db:bool=False, asks:dict|None=None, prepare=None, finish=None)->dict:
    """label -> (score rows, seconds to index, seconds to ask) of a variant, asked once per entry of `asks` (in order);
    `finish` runs before the asks that record accesses, so it sees no activation either"""
    stores, ids, t_ix = build(convs, v, tmp, per_chat_db)
    if prepare: prepare(stores)
    asks, out = asks or {v.label: {}}, {}
    for label, kw in sorted(asks.items(), key=lambda a: bool(a[1].get('record'))):
        if kw.get('record') and finish: out |= finish(stores, ids); finish = None
        rows, t_ask = ask_all(convs, stores, ids, **kw)
        out[label] = (rows, t_ix, t_ask)
    if finish: out |= finish(stores, ids)
    for st in set(stores.values()): st.close()
    return {**{k: out[k] for k in asks}, **out}

def run_bare(convs:list, speaker:bool)->tuple:
    "(score rows, 0, seconds to ask) of the plain FTS5 baseline"
    t = time.perf_counter()
    return score_rows(convs, {cv.idx: bare_ranked(cv, speaker) for cv in convs}), 0.0, time.perf_counter() - t

# ---------------------------------------------------------------- hybrid search: vectors of the chunks multis stores

class CachedEmbedder(Embedder):
    "Another embedder's vectors kept on disk by text (bench/.cache), so a rerun embeds only texts it has not seen"
    def __init__(self, inner:Embedder):
        self.inner, self.name, self.dim, self.batch_size, self.max_cached = inner, inner.name, inner.dim, 100_000, 100_000
        CACHE.mkdir(parents=True, exist_ok=True)
        self.path = CACHE/f"locomo-vectors-{re.sub(r'[^A-Za-z0-9_.-]+', '_', inner.name)}.db"
        self.db = sqlite3.connect(self.path)
        self.db.execute('CREATE TABLE IF NOT EXISTS v(hash TEXT PRIMARY KEY, vector BLOB NOT NULL)')
        self.embedded, self.seconds = 0, 0.0   # texts the model embedded in this run, and the time it took

    def _embed(self, texts:list):
        hs = [text_hash(t) for t in texts]
        have = {}
        for i in range(0, len(hs), 500):
            b = hs[i:i+500]
            have |= dict(self.db.execute(f"SELECT hash, vector FROM v WHERE hash IN ({','.join('?'*len(b))})", b).fetchall())
        if new := [j for j, h in enumerate(hs) if h not in have]:
            t = time.perf_counter()
            vecs = self.inner.embed([texts[j] for j in new])
            self.seconds += time.perf_counter() - t; self.embedded += len(new)
            rows = [(hs[j], v.astype('<f4').tobytes()) for j, v in zip(new, vecs)]
            with self.db: self.db.executemany('INSERT OR REPLACE INTO v VALUES (?, ?)', rows)
            have |= dict(rows)
        return np.stack([np.frombuffer(have[h], dtype='<f4') for h in hs])

WEIGHT_GRID = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
BM25_SAME = 'BM25 on the embedded store (embedder=False)'
VECTOR_ONLY = 'vector only (vector_weight=1.0)'
HYBRID_DEFAULT = f'hybrid, multis defaults (chat memory {Store.memory_vector_weight})'
def hybrid_label(w:float)->str: return f"hybrid, vector_weight {w} for all"

def semantic_embedder(model:str='')->tuple:
    "(the cached MiniLM embedder (or the model in folder `model`), seconds to load the model), or (None, why not)"
    t = time.perf_counter()
    try: inner = LocalEmbedder(model); inner.embed(['warm up'])
    except EmbeddingError as e: return None, str(e)
    return CachedEmbedder(inner), time.perf_counter() - t

def embedding_step(e:CachedEmbedder, stats:dict):
    "A `prepare` for `run`: embed every chunk of the stores, noting chunks, seconds and mean token_count"
    def prepare(stores:dict):
        t, n0, s0 = time.perf_counter(), e.embedded, e.seconds
        for st in set(stores.values()):
            stats['chunks'] = stats.get('chunks', 0) + embed_pending(st, e)
            stats['tokens'] = st._sql('SELECT avg(token_count) FROM chunks').fetchone()[0]
        stats.update(seconds=time.perf_counter() - t, model_texts=e.embedded - n0, model_seconds=e.seconds - s0)
    return prepare

def hybrid_asks(e:Embedder)->dict:
    "The asks of the embedded store: BM25 again, vector only, and hybrid at each weight of the grid"
    return {BM25_SAME: {'embedder': False}, VECTOR_ONLY: {'embedder': e, 'vector_weight': 1.0}, HYBRID_DEFAULT: {'embedder': e},
            **{hybrid_label(w): {'embedder': e, 'vector_weight': w} for w in WEIGHT_GRID}}

# ---------------------------------------------------------------- the runs and the tables

TODAY = Variant('today: log_message -> index_message', path='today')
_H = dict(date=True, prev=2, prev_col=S, ctx_words=50, own_last=True)
PROPOSED = Variant('J  H + the next message (= index_message now)', **_H, nxt=1)
VARIANTS = [
    Variant('A  speaker and minute only (index_message before the breadcrumb)'),
    Variant('B  day in words in the name', date=True),
    Variant('C  B + 2 previous messages in content', date=True, prev=2),
    Variant('D  B + previous message in section_path', date=True, prev=1, prev_col=S),
    Variant('E  B + 2 previous in section_path', date=True, prev=2, prev_col=S),
    Variant('F  E with speakers\' names in the context', date=True, prev=2, prev_col=S, ctx_speaker=True),
    Variant('G  B + 3 previous in section_path', date=True, prev=3, prev_col=S),
    Variant('H  E, 50 words, own name last (index_message before)', **_H),
    Variant('I  H + image captions *', **_H, caption=True, selectable=False),
    PROPOSED,
]
FTS_TEXT, FTS_SPEAKER = 'FTS5 per conversation: text', 'FTS5 per conversation: speaker: text'
H_ASKS = {PROPOSED.label: {}, **{f'J, weights {w}': {'weights': w} for w in ((1.0, 1.0, 0.25), (1.0, 1.0, 1.0), (2.0, 1.0, 0.5), (3.0, 1.0, 0.5))},
          'J, accesses recorded': {'record': True}}

def run_all(convs:list, tmp:Path, e:Embedder|None=None, stats:dict|None=None)->dict:
    "label -> (score rows, seconds to index, seconds to ask) of the baselines and every variant (and hybrid with `e`)"
    res = {FTS_TEXT: run_bare(convs, False), FTS_SPEAKER: run_bare(convs, True)}
    res |= run(convs, TODAY, tmp, asks={TODAY.label: {}, **(hybrid_asks(e) if e else {}),   # recording accesses last
                                        'today, accesses recorded': {'record': True}},
               prepare=embedding_step(e, stats) if e else None, finish=lambda st, ids: units_from_turns(convs, st, ids, e) | boosts_tried(convs, st, ids))
    res |= run(convs, TODAY, tmp, per_chat_db=True, asks={'today, a database per chat': {}})
    for v in VARIANTS: res |= run(convs, v, tmp, asks=H_ASKS if v is PROPOSED else None)
    assert res[PROPOSED.label][0] == res[TODAY.label][0], "variant J no longer scores as index_message does"
    if e: assert res[BM25_SAME][0] == res[TODAY.label][0], "vectors in the store changed keyword-only search"
    return res

# ---------------------------------------------------------------- tried and dropped: boosts after the search

MONTHS = ('january', 'february', 'march', 'april', 'may', 'june', 'july', 'august', 'september', 'october', 'november', 'december')
DATE_RE = re.compile(rf"\b(?:(\d{{1,2}})\s+)?(?:({'|'.join(MONTHS)})\s+)?(?:(\d{{1,2}})(?:st|nd|rd|th)?,?\s+)?(20\d\d)\b", re.I)
BOOSTS = (0.0, 0.25, 0.5, 1.0)   # 0: the top 100's own first 10, the baseline of the tried rows

def named_period(q:str)->tuple|None:
    "(start, end) in seconds of the day, month or year a question names ('in May 2023', 'on 8 May, 2023', 'in 2023')"
    if not (m := DATE_RE.search(q)): return None
    d1, mon, d2, y = m.groups(); y, d = int(y), d1 or d2
    if not mon: return calendar.timegm((y, 1, 1, 0, 0, 0)), calendar.timegm((y + 1, 1, 1, 0, 0, 0))
    mi = MONTHS.index(mon.lower()) + 1
    if d: return (s := calendar.timegm((y, mi, int(d), 0, 0, 0))), s + 86400
    return calendar.timegm((y, mi, 1, 0, 0, 0)), calendar.timegm((y + (mi == 12), mi % 12 + 1, 1, 0, 0, 0))

def boosts_tried(convs:list, stores:dict, ids:dict)->dict:
    "Today's top 100 reordered: turns in the period a question names (+31 days), or by the one speaker it names, score x (1+b)"
    out, t = {}, time.perf_counter()
    hits = {cv.idx: ask_hits(stores[cv.idx], cv, ids[cv.idx], limit=100) for cv in convs}
    for b in BOOSTS:
        dated, spoken = {}, {}
        for cv in convs:
            turn = {t.dia_id: t for t in cv.turns}
            names = {t.speaker for t in cv.turns}
            dated[cv.idx], spoken[cv.idx] = [], []
            for q, hs in zip(cv.questions, hits[cv.idx]):
                got = [(turn[ids[cv.idx][h.chunk_id]], h.score) for h in hs]
                p, who = named_period(q.text), [n for n in names if re.search(rf"\b{re.escape(n)}\b", q.text)]
                near = (lambda x: p[0] <= x.ts < p[1] + 31*86400) if p else (lambda x: False)
                by = (lambda x: x.speaker == who[0]) if len(who) == 1 else (lambda x: False)
                for keep, rule in ((dated, near), (spoken, by)):
                    keep[cv.idx].append([x.dia_id for x, s in sorted(got, key=lambda g: -g[1] * (1 + b*rule(g[0])))][:max(KS)])
        if not b: out["tried: today's top 100, first 10"] = (score_rows(convs, dated), 0.0, time.perf_counter() - t); continue
        out[f"tried: date named, x{1 + b}"] = (score_rows(convs, dated), 0.0, time.perf_counter() - t)
        out[f"tried: speaker named, x{1 + b}"] = (score_rows(convs, spoken), 0.0, time.perf_counter() - t)
    return out

# ---------------------------------------------------------------- coarser units: sessions and six-turn windows

UNITS = {'session': None, 'six-turn window': 6}   # a window: turns 1-6, 7-12, ... of one session

def unit_ids(cv:Conv, size:int|None)->dict:
    "dia_id -> the id of its unit: its session ('S3'), or its block of `size` turns in the session ('S3:W1')"
    out, seen = {}, {}
    for t in cv.turns:
        i = seen[t.session] = seen.get(t.session, -1) + 1
        out[t.dia_id] = f"S{t.session}" if size is None else f"S{t.session}:W{i // size}"
    return out

def as_units(ranked:list, unit:dict, k:int=max(KS))->list:
    "The first k distinct units of a ranked list of dia_ids"
    return list(dict.fromkeys(unit[d] for d in ranked))[:k]

def unit_rows(convs:list, ranked:dict, size:int|None)->list:
    "Score rows of ranked units against each question's evidence units"
    out = []
    for cv in convs:
        u = unit_ids(cv, size)
        out += [(cv.idx, q.category, question_scores(r, list(dict.fromkeys(u[d] for d in q.evidence))))
                for q, r in zip(cv.questions, ranked[cv.idx])]
    return out

def units_from_turns(convs:list, stores:dict, ids:dict, e=None)->dict:
    "Units of multis's turn ranking (its top 60 turns, in order, each replaced by its unit; the first 10 distinct)"
    out = {}
    for label, kw in {'multis turns': {'embedder': False}, **({'multis turns, hybrid': {'embedder': e}} if e else {})}.items():
        t = time.perf_counter()
        turns = {cv.idx: ask(stores[cv.idx], cv, ids[cv.idx], limit=60, **kw) for cv in convs}
        for name, size in UNITS.items():
            out[f"{name}s from {label}"] = (unit_rows(convs, {i: [as_units(r, unit_ids(cv, size)) for r in turns[i]]
                                                               for i, cv in ((cv.idx, cv) for cv in convs)}, size), 0.0, time.perf_counter() - t)
    return out

def unit_chunk(cv:Conv, uid:str, turns:list)->DocChunk:
    "One unit as a chunk of its chat: the turns' 'speaker: text' lines, named after the session's first turn's day"
    return DocChunk(f"locomo/{cv.idx}/{uid}", f"{day_words(turns[0].ts)}, {time.strftime('%H:%M', time.localtime(turns[0].ts))}",
                    '\n'.join(f"{t.speaker}: {t.text}" for t in turns), element_type='paragraph', document_type='conversation',
                    scope=chat_scope(chat_id(cv)))

def units_indexed(convs:list, tmp:Path, e=None, stats:dict|None=None)->dict:
    "Each unit indexed as a chunk (all chats in one database) and searched like the turns: BM25, and hybrid with `e`"
    out = {}
    for name, size in UNITS.items():
        st, ids = Store(Path(tempfile.mkdtemp(dir=tmp))/'units.db'), {}
        for cv in convs:
            u, by = unit_ids(cv, size), {}
            for t in cv.turns: by.setdefault(u[t.dia_id], []).append(t)
            cs = [unit_chunk(cv, uid, ts) for uid, ts in by.items()]
            st.save(cs); ids[cv.idx] = {c.chunk_id: uid for c, uid in zip(cs, by)}
        if e: embed_pending(st, e)
        for label, kw in {'BM25': {'embedder': False}, **({'hybrid': {'embedder': e}} if e else {})}.items():
            t = time.perf_counter()
            ranked = {cv.idx: ask(st, cv, ids[cv.idx], **kw) for cv in convs}
            out[f"{name}s indexed, {label}"] = (unit_rows(convs, ranked, size), 0.0, time.perf_counter() - t)
        st.close()
    return out

def split_groups(have:set, custom:bool)->list:
    "(title, conversations) to report: the chosen conversations, or each split they cover"
    return ([('conversations ' + ','.join(map(str, sorted(have))), have)] if custom else
            [(f"{n} split (conversations {r.start}-{r.stop - 1})", set(r)) for n, r in SPLITS.items() if n != 'all' and set(r) <= have])

def units_report(res:dict, have:set, custom:bool):
    "Turn-level R@10 beside the same questions scored by session and by six-turn window (as published figures are)"
    for title, g in split_groups(have, custom): table(res, g, f"Coarser units, {title}: R@k = share of the evidence's units in the top k units")

W = 44
HEAD = (f"{'':<{W}} {'n':>4} | {'R@1':>5} {'R@5':>5} {'R@10':>5} | {'hit@1':>5} {'hit@5':>5} {'hit@10':>6} | R@10 of category"
        + ''.join(f"{c:>6}" for c in CATS))

def table(res:dict, convs, title:str):
    "One line per run: n, R@k, hit@k and R@10 per category over these conversations"
    print(f"\n{title}\n{HEAD}")
    for label, (rows, _, _) in res.items():
        m = mean(rows, convs)
        if not m['n']: continue
        cats = ''.join(f"{mean(rows, convs, c).get('R@10', float('nan')):>6.3f}" for c in CATS)
        print(f"{label:<{W}} {m['n']:>4} | " + ' '.join(f"{m[f'R@{k}']:>{max(5, len(str(k)) + 2)}.3f}" for k in KS) + ' | '
              + ' '.join(f"{m[f'hit@{k}']:>{len(f'hit@{k}')}.3f}" for k in KS) + f" | {'':16}{cats}")

def by_category(res:dict, labels:list, convs, title:str):
    "Every figure per category for a few runs"
    print(f"\n{title}")
    for c in CATS:
        for label in labels:
            m = mean(res[label][0], convs, c)
            if m['n']: print(f"  {c} {CATS[c]:<12} {label:<{W}} n={m['n']:>3}  " + '  '.join(f"{k} {m[k]:.3f}" for k in m if k != 'n'))

def best_on(res:dict, convs)->str:
    "The selectable variant with the best R@10 on these conversations"
    ok = [v.label for v in [TODAY, *VARIANTS] if v.selectable]
    return max(ok, key=lambda l: mean(res[l][0], convs)['R@10'])

def settings(convs:list, path:Path):
    "The data and how it is indexed and asked"
    qs = [q for cv in convs for q in cv.questions]
    print(f"LoCoMo {path.name}: conversations {','.join(str(cv.idx) for cv in convs)}: {sum(len(cv.turns) for cv in convs):,} turns, "
          f"{len(qs):,} questions of categories 1-4 (" + ', '.join(f"{c} {CATS[c]} {sum(q.category == c for q in qs)}" for c in CATS) + ')')
    print(f"  evidence ids naming no turn left out: {sum(cv.dropped[0] for cv in convs)}; questions left without evidence: "
          f"{sum(cv.dropped[1] for cv in convs)}")
    print(f"  turns: log_message(chat 'locomo-<i>', role 'user', cfg memory.index_raw=True, now=session date + {TURN_GAP:.0f} s a turn, "
          f"speaker=name); window trimmed to {CFG['memory']['recent_window']}; all chats in one database")
    print(f"  questions: Store.search(q, limit={max(KS)}, scopes=['kb', 'user:locomo-<i>'], record=False), defaults {DEFAULTS}")
    print(f"  context (B-J): previous messages of the last {CONTEXT_GAP/60:.0f} min; H cuts each to {CONTEXT_WORDS} words")
    print(f"  R@k: share of a question's evidence turns in the top k; hit@k: at least one in the top k; averaged over questions")
    print(f"  categories: " + ', '.join(f"{c} {CATS[c]}" for c in CATS) + "; * not available to index_message (left out of the selection)")

def report(res:dict, convs:list, custom:bool):
    "The tables: each split (or the chosen conversations), the best variant on the tune split, the report split by category"
    hyb = {k: res.pop(k) for k in [BM25_SAME, VECTOR_ONLY, HYBRID_DEFAULT, *map(hybrid_label, WEIGHT_GRID)] if k in res}
    unit = {k: res.pop(k) for k in list(res) if ' from multis turns' in k or 's indexed, ' in k}
    have = {cv.idx for cv in convs}
    groups = split_groups(have, custom)
    for title, g in groups: table(res, g, title)
    if set(range(10)) <= have and not custom:
        table({k: res[k] for k in (FTS_TEXT, FTS_SPEAKER, TODAY.label, PROPOSED.label)}, set(range(10)), "all ten conversations")
    tune, rep = set(SPLITS['tune']), set(SPLITS['report'])
    if tune <= have and not custom:
        best = best_on(res, tune)
        print(f"\nbest on the tune split by R@10: {best}")
        if rep <= have: by_category(res, list(dict.fromkeys([FTS_SPEAKER, TODAY.label, best, PROPOSED.label])), rep,
                                    'report split by category:')
    print(f"\nscopes: {sum(len(cv.questions) for cv in convs):,} questions x {len(res) + len(hyb) - 2} runs, no hit from outside the asking chat")
    if hyb: hybrid_report({**{k: res[k] for k in (FTS_TEXT, FTS_SPEAKER)}, **hyb}, have, custom)
    if unit: units_report({f"turns: {TODAY.label}": res[TODAY.label], **({'turns: ' + HYBRID_DEFAULT: hyb[HYBRID_DEFAULT]} if HYBRID_DEFAULT in hyb else {}),
                           **unit}, have, custom)

def hybrid_report(res:dict, have:set, custom:bool):
    "BM25 beside vector only and hybrid at each weight; the weight chosen on the tune split, reported on the report split"
    tune, rep = set(SPLITS['tune']), set(SPLITS['report'])
    groups = split_groups(have, custom)
    for title, g in groups: table(res, g, f"Hybrid search, {title} (vectors of multis's chunks: name and content)")
    if custom or not tune <= have: return
    best = max(WEIGHT_GRID, key=lambda w: (round(mean(res[hybrid_label(w)][0], tune)['R@10'], 6), -abs(w - Store.memory_vector_weight)))
    print(f"\nvector weight chosen on the tune split by R@10: {best}")
    if not rep <= have: return
    base = mean(res[BM25_SAME][0], rep)
    print("report split, R@10 and hit@10 (difference to BM25 on the same store, ratio):")
    for label in [FTS_SPEAKER, BM25_SAME, VECTOR_ONLY, hybrid_label(0.7), HYBRID_DEFAULT, hybrid_label(best)]:
        m = mean(res[label][0], rep)
        print(f"  {label:<{W}} R@10 {m['R@10']:.3f} ({m['R@10'] - base['R@10']:+.3f}, {m['R@10'] / base['R@10']:.3f}x)  "
              f"hit@10 {m['hit@10']:.3f} ({m['hit@10'] - base['hit@10']:+.3f})")
    by_category(res, list(dict.fromkeys([BM25_SAME, HYBRID_DEFAULT, hybrid_label(best)])), rep,
                'report split by category, hybrid:')

def api_check(path:Path, convs:list, res:dict):
    "The report split's search-option rows again through multis.workbench.locomo and .variants (ranx), beside this run's"
    try: from multis.workbench.locomo import load_locomo, locomo_collection, LOCOMO_METRICS
    except ImportError as e: return print(f"\nvariants API skipped: {e} (pip install -e '.[explorer]')")
    from multis.workbench.variants import run_variants
    t = time.perf_counter()
    coll = locomo_collection(load_locomo(path, [cv.idx for cv in convs]), ask=SPLITS['report'])
    rows = {TODAY.label: {}, **{k: {'bm25_weights': v['weights']} for k, v in H_ASKS.items() if 'weights' in v}}
    api = run_variants(coll, rows, metrics=LOCOMO_METRICS).means()
    print(f"\nreport split through multis.workbench.variants (metrics by ranx; {time.perf_counter() - t:.0f} s): API / this run")
    for label in rows:
        b, a = mean(res[label][0], set(SPLITS['report'])), api.loc[label]
        print(f"  {label:<{W}} n {int(a['n'])}/{b['n']}  " + '  '.join(
            f"{k} {a[m]:.4f}/{b[k]:.4f}" for k, m in (('R@1', 'recall@1'), ('R@10', 'recall@10'), ('hit@10', 'hit_rate@10'))))
    worst = max(abs(api.loc[l][f'{m}@{k}'] - mean(res[l][0], set(SPLITS['report']))[f'{b}@{k}'])
                for l in rows for m, b in (('recall', 'R'), ('hit_rate', 'hit')) for k in KS)
    print(f"  largest difference: {worst:.1e}")

def index_cost(cv:Conv, tmp:Path, repeats:int=3)->tuple:
    "(turns/s of log_message with index_raw as now, without the update of the message before), best of interleaved runs"
    import multis.memory.capture as cap
    real = cap._index_entry
    def new_only(store, mem, m, before, new):   # index_message before this change: the new message's chunk only
        c = cap._entry_doc(mem, m, before)
        if new or (m.get('msg_id') and store.get(c.chunk_id) is None): store.save([c])
    best = {True: 0.0, False: 0.0}
    for _ in range(repeats):
        for now in (True, False):
            cap._index_entry = real if now else new_only
            try:
                d = Path(tempfile.mkdtemp(dir=tmp))
                with Store(d/'m.db') as st, working_dir(d):
                    t = time.perf_counter(); feed(st, Path('home'), cv, Variant('x', path='today' if now else 'raw'))
                    best[now] = max(best[now], len(cv.turns) / (time.perf_counter() - t))
            finally: cap._index_entry = real
    return best[True], best[False]

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--path', type=Path, default=LOCOMO, help='locomo10.json')
    ap.add_argument('--split', choices=list(SPLITS), default='all', help='tune: 0-4, report: 5-9, all: both')
    ap.add_argument('--conversations', help='comma-separated conversation numbers (overrides --split)')
    ap.add_argument('--no-semantic', action='store_true', help='skip hybrid search (on when the model loads)')
    ap.add_argument('--model', default='', help='a sentence-transformers model folder for the hybrid runs (default: the packaged MiniLM)')
    args = ap.parse_args(argv)
    print(machine())
    if not args.path.is_file(): sys.exit(f"LoCoMo not found at {args.path}")
    want = [int(x) for x in args.conversations.split(',')] if args.conversations else list(SPLITS[args.split])
    convs = [cv for cv in load(args.path) if cv.idx in want]
    settings(convs, args.path)
    t = time.perf_counter()
    e, t_load, stats = *((None, 'off (--no-semantic)') if args.no_semantic else semantic_embedder(args.model)), {}
    print(f"  hybrid: {e.name} loaded in {t_load:.1f} s, vectors cached in {e.path.relative_to(CACHE.parent.parent)}" if e
          else f"  hybrid: skipped: {t_load}")
    with tempfile.TemporaryDirectory() as tmp:
        res = run_all(convs, Path(tmp), e, stats) | units_indexed(convs, Path(tmp), e)
        if e and args.model and (base := semantic_embedder()[0]):   # the packaged model beside it, in this run
            res |= run(convs, TODAY, Path(tmp), asks={f"{HYBRID_DEFAULT}, {base.name}": {'embedder': base}}, prepare=embedding_step(base, {}))
    times = {k: res[k][2] for k in (TODAY.label, HYBRID_DEFAULT) if k in res}
    report(res, convs, bool(args.conversations))
    if not args.conversations and set(SPLITS['report']) <= {cv.idx for cv in convs}: api_check(args.path, convs, res)
    with tempfile.TemporaryDirectory() as tmp: now_tps, before_tps = index_cost(convs[0], Path(tmp))
    print(f"\nlog_message with memory.index_raw, conversation {convs[0].idx} ({len(convs[0].turns)} turns), best of 3 interleaved: "
          f"{now_tps:,.0f} turns/s; without updating the message before (index_message before J) {before_tps:,.0f} turns/s "
          f"({before_tps / now_tps:.2f}x)")
    print(f"indexing {sum(len(cv.turns) for cv in convs) / res[TODAY.label][1]:,.0f} turns/s and asking "
          f"{len(res[TODAY.label][0]) / res[TODAY.label][2]:,.0f} questions/s (multis today); whole run {time.perf_counter() - t:.0f} s")
    if not e: return
    n, dt = stats['model_texts'], stats['model_seconds']
    print(f"hybrid: {stats['chunks']:,} chunks given vectors in {stats['seconds']:.1f} s (mean token_count {stats['tokens']:.1f}); the model "
          + (f"embedded {n:,} of them in {dt:.1f} s = {n / dt:.0f} chunks/s" if n else "embedded none of them (all from the cache)"))
    print(f"hybrid: asking with the default weights: {len(res[TODAY.label][0]) / times[HYBRID_DEFAULT]:,.0f} questions/s, "
          f"{times[HYBRID_DEFAULT] / times[TODAY.label]:.1f}x BM25's time (query vectors embedded during the vector-only pass; "
          f"{e.embedded - n:,} questions embedded in this run)")

if __name__ == '__main__': main()
