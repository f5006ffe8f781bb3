"Structured facts on a real SQLite file: ordinals answer exactly, topics and chats never bleed, bad input stores nothing"
import itertools, sqlite3, time
import pytest
from hypothesis import given, settings, assume, strategies as stx, HealthCheck
from multis.retrieval.store import Store
from multis.memory.facts import FactStore, Fact, FactError, parse_fact_question, answer_fact_question, ABSENT, KINDS
from multis.memory.statements import extract_facts, normalize_topic, singular, MAX_RANK

# (singular phrase, plural phrase) pairs; each pair is its own topic
NOUNS = [('colour', 'colours'), ('color', 'colors'), ('book', 'books'), ('film', 'films'), ('movie', 'movies'),
         ('song', 'songs'), ('city', 'cities'), ('food', 'foods'), ('drink', 'drinks'), ('cheese', 'cheeses'),
         ('tv show', 'tv shows'), ('sci-fi book', 'sci-fi books'), ('podcast', 'podcasts'), ('wine', 'wines'),
         ('flower', 'flowers'), ('board game', 'board games'), ('beach', 'beaches'), ('knife', 'knives')]
ORDS = 'first second third fourth fifth sixth seventh eighth ninth tenth'.split()
RESERVED = set("""and or not no never but because since although though whereas which who first second third fourth
  fifth sixth seventh eighth ninth tenth it that this these those mine same none unknown too now also lol haha btw
  in order ranked called named then definitely probably actually really currently obviously honestly clearly still
  always just""".split())

word = stx.from_regex(r'[A-Za-zÅÆØåæøéüß]{2,9}', fullmatch=True).filter(lambda w: w.lower() not in RESERVED)
value = stx.lists(word, min_size=1, max_size=3).map(' '.join)

def _form(kind:str, noun:str, vals:list)->str:
    "A message stating `vals` as a ranked list in one of the forms people use"
    if kind == 'paren': return f"my favourite {noun} are " + ' '.join(f"{i}) {v}" for i, v in enumerate(vals, 1))
    if kind == 'dot': return f"My favorite {noun} are " + ', '.join(f"{i}. {v}" for i, v in enumerate(vals, 1)) + '.'
    if kind == 'hash': return f"my fav {noun}: " + ' '.join(f"#{i} {v}" for i, v in enumerate(vals, 1))
    if kind == 'lines': return f"My top {len(vals)} {noun}:\n" + '\n'.join(f"{i}. {v}" for i, v in enumerate(vals, 1))
    if kind == 'bullets': return f"Here are my favourite {noun}\n" + '\n'.join(f"- {v}" for v in vals)
    if kind == 'ordwords': return f"my favourite {noun} are " + ', '.join(f"{ORDS[i]} {v}" for i, v in enumerate(vals))
    return f"my favourite {noun}, in order, are " + ', '.join(vals[:-1]) + f" and {vals[-1]}"

FORMS = ['paren', 'dot', 'hash', 'lines', 'bullets', 'ordwords', 'inorder']

@pytest.fixture(scope='module')
def facts(tmp_path_factory):
    st = Store(tmp_path_factory.mktemp('facts')/'multis.db')
    yield FactStore(st)
    st.close()

_chats = itertools.count()

@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pair=stx.sampled_from(NOUNS), other=stx.sampled_from(NOUNS), form=stx.sampled_from(FORMS),
       vals=stx.lists(value, min_size=2, max_size=10, unique_by=str.lower))
def test_ordinals_answer_exactly_and_topics_never_bleed(facts, pair, other, form, vals):
    assume(form != 'inorder' or all(',' not in v for v in vals))
    chat = f"chat-{next(_chats)}"
    (one, many), key = pair, normalize_topic(f"favourite {pair[1]}")
    stored = facts.remember_text(chat, _form(form, many, vals), now=1.0)
    assert [(f.topic, f.rank, f.value) for f in stored] == [(key, i, v) for i, v in enumerate(vals, 1)]
    for i, v in enumerate(vals, 1):
        ans = answer_fact_question(facts, chat, f"what is my {ORDS[i-1]} favourite {one}?")
        assert ans == (f"Your favourite {one} is {v}." if i == 1 else f"Your {ORDS[i-1]} favourite {one} is {v}.")
        assert answer_fact_question(facts, chat, f"my #{i} {one}?").endswith(f" is {v}.")
        assert facts.get_fact(chat, key, i).value == v
    assert answer_fact_question(facts, chat, f"what is my number {len(vals) + 1} favourite {one}?") == ABSENT
    listed = answer_fact_question(facts, chat, f"list my favourite {many}")
    assert listed == f"Your favourite {many}: " + ', '.join(f"{i}. {v}" for i, v in enumerate(vals, 1)) + '.'
    if normalize_topic(f"favourite {other[1]}") != key:
        assert answer_fact_question(facts, chat, f"what is my second favourite {other[0]}?") == ABSENT
        assert answer_fact_question(facts, chat, f"what are my favourite {other[1]}?") == ABSENT

@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pair=stx.sampled_from(NOUNS), vals=stx.lists(value, min_size=1, max_size=5, unique_by=str.lower))
def test_chat_isolation(facts, pair, vals):
    a, b = f"a-{next(_chats)}", f"b-{next(_chats)}"
    facts.remember_text(a, _form('paren', pair[1], vals), now=1.0)
    assert answer_fact_question(facts, b, f"what is my favourite {pair[0]}?") == ABSENT
    assert answer_fact_question(facts, b, f"list my favourite {pair[1]}") == ABSENT
    assert facts.get_facts(b) == [] and len(facts.get_facts(a)) == len(vals)
    assert answer_fact_question(facts, a, f"what is my favourite {pair[0]}?") == f"Your favourite {pair[0]} is {vals[0]}."

def test_chat_ids_match_exactly(tmp_path):
    with Store(tmp_path/'multis.db') as st:
        fs = FactStore(st)
        fs.remember_text('1', 'my favourite colour is blue')
        for other in ['10', '01', ' 1', '%', "1' OR '1'='1", '']:
            assert fs.get_facts(other) == [] and answer_fact_question(fs, other, 'what is my favourite colour?') == ABSENT
        assert answer_fact_question(fs, 1, 'what is my favourite colour?') == 'Your favourite colour is blue.'  # int id = its string

def test_persistence_across_reopening(tmp_path):
    p = tmp_path/'multis.db'
    with Store(p) as st:
        FactStore(st).remember_text('c', 'My top 3 films:\n1. Alien\n2. Blade Runner 2049\n3. Up\nmy name is Anna', now=5.0)
    with Store(p) as st:
        fs = FactStore(st)   # CREATE TABLE IF NOT EXISTS: the rows are still there
        assert answer_fact_question(fs, 'c', "what's my #2 movie") == 'Your second favourite movie is Blade Runner 2049.'
        assert answer_fact_question(fs, 'c', 'what is my name?') == 'Your name is Anna.'
        assert fs.get_fact('c', 'favorite_film', 3) == Fact('c', 'favorite_film', 'ranked', 3, 'Up', 5.0)
        assert st.stats()['chunks'] == 0   # the chunk tables are untouched
    raw = sqlite3.connect(p)
    assert raw.execute("SELECT count(*) FROM facts WHERE chat_id='c'").fetchone()[0] == 4
    raw.close()

def test_restating_replaces_and_one_rank_updates(tmp_path):
    with Store(tmp_path/'multis.db') as st:
        fs = FactStore(st)
        fs.remember_text('c', 'my favourite colours are 1) blue 2) green 3) black 4) white', now=1)
        fs.remember_text('c', 'My third favourite colour is red', now=2)
        assert [f.value for f in fs.get_facts('c', 'favorite_color')] == ['blue', 'green', 'red', 'white']
        fs.remember_text('c', 'my favorite colors are 1. teal 2. pink', now=3)
        assert [(f.rank, f.value) for f in fs.get_facts('c', 'favourite colours')] == [(1, 'teal'), (2, 'pink')]
        assert answer_fact_question(fs, 'c', 'what is my third favourite colour?') == ABSENT
        fs.remember_text('c', 'my favourite colours are 1) old', now=0.5)   # older than what is stored: ignored
        assert [f.value for f in fs.get_facts('c', 'favorite_color')] == ['teal', 'pink']
        assert fs.forget_facts('c', 'favourite colours') == 2 and fs.get_facts('c') == []

def test_empty_and_question_only_texts_store_nothing(tmp_path):
    with Store(tmp_path/'multis.db') as st:
        fs = FactStore(st)
        for t in ['', '   ', '\n\n', '?', 'what is my favourite colour?', 'what are my top 3 films?',
                  'is my favourite colour blue?', 'my favourite colour?', 'my favourite colour is not red']:
            assert fs.remember_text('c', t) == [] and extract_facts(t) == []
        assert fs.get_facts('c') == []
        assert answer_fact_question(fs, 'c', 'what is my favourite colour?') == ABSENT

def test_very_long_text_is_quick_and_stores_nothing(tmp_path):
    long = ('my favourite colour is blue. ' * 3500)[:100_000]
    junk = ('my ' + 'x' * 70 + ' is ' + '1) a ' * 50) * 300
    with Store(tmp_path/'multis.db') as st:
        fs = FactStore(st)
        t0 = time.perf_counter()
        for t in [long, junk, 'a' * 100_000, '1) ' * 33_000]:
            assert fs.remember_text('c', t) == []
            assert parse_fact_question(t) is None and answer_fact_question(fs, 'c', t) is None
        assert time.perf_counter() - t0 < 1.0
        assert fs.get_facts('c') == []
    just_under = 'my favourite colour is blue. ' + 'filler words here. ' * 200   # under the limit: still read
    assert extract_facts(just_under) == [('favorite_color', 'single', None, 'blue')]

def test_unicode_values_keep_their_case(tmp_path):
    with Store(tmp_path/'multis.db') as st:
        fs = FactStore(st)
        fs.remember_text('c', 'Mine: my favourite berries are 1) Blåbær 2) Multebær 3) ÆBLE', now=1)
        assert answer_fact_question(fs, 'c', 'what is my third favourite berry?') == 'Your third favourite berry is ÆBLE.'
        assert answer_fact_question(fs, 'c', 'list my favourite berries') == 'Your favourite berries: 1. Blåbær, 2. Multebær, 3. ÆBLE.'
        fs.remember_text('c', 'my favourite city is São Paulo 🙂', now=2)
        assert fs.get_fact('c', 'favourite city').value == 'São Paulo'

def test_ranks_beyond_ten(tmp_path):
    assert extract_facts('11) x') == [] and extract_facts('my favourite colours are 11) x') == []   # a list starts at 1
    got = extract_facts('my favourite colours are 1) red 11) x 21) y')
    assert got == [('favorite_color', 'ranked', 1, 'red'), ('favorite_color', 'ranked', 11, 'x')]   # MAX_RANK is 20
    with Store(tmp_path/'multis.db') as st:
        fs = FactStore(st)
        fs.remember_text('c', 'my favourite colours are 1) red 11) x 21) y')
        assert answer_fact_question(fs, 'c', 'what is my 11th favourite colour?') == 'Your eleventh favourite colour is x.'
        assert answer_fact_question(fs, 'c', 'what is my 21st favourite colour?') == ABSENT
        assert answer_fact_question(fs, 'c', 'what is my number 99 favourite colour?') == ABSENT
        with pytest.raises(FactError, match='rank from 1 to'): fs.store_fact('c', 'favorite_color', 'ranked', 'z', rank=MAX_RANK + 1)

def test_answers_fall_through_for_non_fact_questions(tmp_path):
    with Store(tmp_path/'multis.db') as st:
        fs = FactStore(st)
        fs.remember_text('c', 'my favourite colours are 1) blue 2) green')
        for t in ['what colour is the sky', 'how do I pair my phone', 'what is my wifi password?', 'summarise my notes',
                  'my favourite colour is blue', 'why is my favourite colour blue?', 'What is the capital of France?']:
            assert answer_fact_question(fs, 'c', t) is None, t

@settings(max_examples=300, deadline=None)
@given(stx.text(max_size=400) | stx.lists(stx.sampled_from(
    ['my', 'favourite', 'colours', 'are', 'is', '1)', '2.', '#3', 'first', 'blue', 'not', '?', ',', 'and', ':', '\n',
     'what', 'top', '3', 'films', "isn't", 'Blåbær', '-', 'in order', '[M1]', '**']), max_size=40).map(' '.join))
def test_arbitrary_text_never_breaks(text):
    for topic, kind, rank, val in extract_facts(text):
        assert kind in KINDS and normalize_topic(topic) == topic and val == val.strip() and 0 < len(val) <= 200
        assert (rank is None) == (kind == 'single') and (rank is None or 1 <= rank <= MAX_RANK)
    q = parse_fact_question(text)
    assert q is None or (normalize_topic(q[0]) == q[0] and q[2] in ('ordinal', 'list', 'single'))

@settings(max_examples=200, deadline=None)
@given(stx.lists(stx.sampled_from(['favourite', 'least', 'top', '3', 'five', 'sci-fi', 'colours', 'films', 'movies',
                                   'tv', 'shows', 'series', 'cheeses', 'wolves', 'cities', 'people', 'first', 'name',
                                   'all-time', 'kind', 'of', 'music', 'Blåbær', 'buses', 'heroes', 'number', '#2']),
                 min_size=1, max_size=5).map(' '.join))
def test_topic_keys_are_stable(phrase):
    key = normalize_topic(phrase)
    assert key is None or normalize_topic(key) == key

def test_spelling_plurals_and_synonyms_meet():
    assert len({normalize_topic(p) for p in ['favourite colours', 'favorite colors', 'fav colour', 'top 3 colours',
                                             'Favourite Colour', 'my favorite color']}) == 1
    assert len({normalize_topic(p) for p in ['favourite films', 'favorite movies', 'top five movies', 'fave flicks']}) == 1
    assert len({normalize_topic(p) for p in ['favourite tv shows', 'favourite series', 'favorite TV programmes']}) == 1
    keys = [normalize_topic(f"favourite {n}") for _, n in NOUNS]
    assert None not in keys
    assert normalize_topic('least favourite colour') != normalize_topic('favourite colour')
    assert singular('cheeses') == 'cheese' and singular('wolves') == 'wolf' and singular('olives') == 'olive'

def test_raw_connection_and_store_share_the_table(tmp_path):
    p = tmp_path/'multis.db'
    with Store(p) as st: FactStore(st).store_fact('c', 'favourite drinks', 'ranked', 'tea', rank=1, now=1)
    conn = sqlite3.connect(p)
    fs = FactStore(conn)
    assert fs.get_fact('c', 'favorite_drink', 1).value == 'tea'
    fs.remember_text('c', 'my favourite drinks are 1) coffee 2) water', now=2)
    conn.close()
    with Store(p) as st:
        assert answer_fact_question(FactStore(st), 'c', 'list my favourite drinks') == 'Your favourite drinks: 1. coffee, 2. water.'

# --- issue 14 item 23: restating one rank updates that rank; a full new list or "only" replaces the list ---

def test_restating_one_rank_keeps_the_other_ranks(tmp_path):
    with Store(tmp_path/'multis.db') as st:
        fs = FactStore(st)
        fs.remember_text('c', 'my favourite colours are 1) blue 2) green', now=1)
        fs.remember_text('c', 'my favourite colours are 1) red', now=2)
        assert [(f.rank, f.value) for f in fs.get_facts('c', 'favorite_color')] == [(1, 'red'), (2, 'green')]
        assert answer_fact_question(fs, 'c', 'what is my second favourite colour?') == 'Your second favourite colour is green.'
        fs.remember_text('c', 'My third favourite colour is black', now=3)
        assert [f.value for f in fs.get_facts('c', 'favorite_color')] == ['red', 'green', 'black']

@pytest.mark.parametrize('text, want', [
    ('my favourite colours are now only red', [(1, 'red')]),
    ('My favourite colours are just teal and pink.', [(1, 'teal'), (2, 'pink')]),
    ('my favourite colours are red only', [(1, 'red')]),
    ('my favourite colours are 1) teal 2) pink', [(1, 'teal'), (2, 'pink')]),
    ('my favourite colours are teal, pink', [(1, 'teal'), (2, 'pink')]),
    ('my favourite colours are red', [(1, 'red'), (2, 'green'), (3, 'black')]),
    ('my favourite colours are 2) pink 3) white', [(1, 'blue'), (2, 'pink'), (3, 'white')]),
    ('my second favourite colour is pink', [(1, 'blue'), (2, 'pink'), (3, 'black')]),
])
def test_full_new_list_replaces_and_partial_restatement_updates(tmp_path, text, want):
    with Store(tmp_path/'multis.db') as st:
        fs = FactStore(st)
        fs.remember_text('c', 'my favourite colours are 1) blue 2) green 3) black', now=1)
        fs.remember_text('c', text, now=2)
        assert [(f.rank, f.value) for f in fs.get_facts('c', 'favorite_color') if f.kind == 'ranked'] == want
