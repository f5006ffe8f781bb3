"Property tests of multis.documents.chunker against the installed package"
import re
from dataclasses import replace

import pytest
from hypothesis import given, settings, strategies as st, HealthCheck

from multis.documents.chunker import split_text, text_parts, chunk_section, chunk_all
from multis.core import DocChunk

WORDS = ['tomato', 'basil', 'pairing', 'code', 'Lisbon', 'ferry', 'mulch', 'café', 'Привет', '東京', '🍅', 'a', 'x'*30]
SEPS = ['. ', '! ', '? ', '\n\n', '\n', ' ', ', ', '.', '!']

@st.composite
def sentences(draw):
    "Text made of words and separators, repeated up to ~20,000 characters"
    toks = draw(st.lists(st.tuples(st.sampled_from(WORDS), st.sampled_from(SEPS)), min_size=1, max_size=60))
    unit = ''.join(w + s for w, s in toks)
    return (unit * draw(st.integers(0, 20000 // len(unit) + 1)))[:20000]

@st.composite
def no_separators(draw):
    "Text with no separator at all (letters, digits, unicode), up to 20,000 characters"
    unit = draw(st.text(st.characters(blacklist_characters='.!?\n\r '), min_size=1, max_size=50))
    return (unit * draw(st.integers(0, 20000 // len(unit) + 1)))[:20000]

@st.composite
def separators_only(draw):
    "Text made only of separators and single letters: breaks everywhere"
    unit = ''.join(draw(st.lists(st.sampled_from(['.', '!', '?', ' ', '\n', 'a', 'é']), min_size=1, max_size=40)))
    return (unit * draw(st.integers(0, 20000 // len(unit) + 1)))[:20000]

texts = st.one_of(sentences(), no_separators(), separators_only(), st.text(max_size=3000))

@st.composite
def sizes(draw):
    "A (size, overlap) pair with size > 2*overlap, from tiny to the defaults and beyond"
    size = draw(st.one_of(st.integers(1, 50), st.integers(51, 4000), st.just(2000)))
    overlap = draw(st.one_of(st.integers(0, (size - 1) // 2), st.just(min(200, (size - 1) // 2)), st.just(0)))
    return size, overlap

def check_parts(text, size, overlap):
    "Assert every property of the parts of `text`; return the spans"
    spans = split_text(text, size, overlap)
    parts = [text[s:e] for s, e in spans]
    assert parts == text_parts(text, size, overlap)
    assert all(len(p) <= size for p in parts)
    assert spans[0][0] == 0 and spans[-1][1] == len(text)
    for (s0, e0), (s1, e1) in zip(spans, spans[1:]):
        assert s1 == e0 - overlap                      # the next part starts `overlap` before the cut
        assert s1 - s0 >= size // 2 - overlap          # every part but the last advances
        assert s1 - s0 >= size // 2 + 1 - overlap and s1 > s0
    for a, b in zip(parts, parts[1:]):
        assert a[len(a) - overlap:] == b[:overlap]     # consecutive parts share exactly `overlap` characters
        assert len(a) >= overlap and len(b) > overlap
    assert parts[0] + ''.join(p[overlap:] for p in parts[1:]) == text
    step = size // 2 + 1 - overlap                     # >= 1 since size > 2*overlap
    assert len(parts) <= len(text) / step + 2
    if size // 2 - overlap > 0: assert len(parts) <= len(text) / (size // 2 - overlap) + 2
    return spans

@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts, sizes())
def test_split_properties(text, so):
    check_parts(text, *so)

@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts)
def test_split_properties_defaults(text):
    spans = check_parts(text, 2000, 200)
    if len(text) <= 2000: assert spans == [(0, len(text))]
    assert all(s1 - s0 >= 800 for (s0, _), (s1, _) in zip(spans, spans[1:]))

def test_sentence_break_near_window_end_does_not_creep():
    "A `. ` just before each window's end must not make the next part start a few characters later"
    for gap in range(0, 6):
        unit = 'w' * (1998 - gap) + '. '                 # a sentence end right at the end of the window
        text = (unit * 12)[:20000]
        spans = check_parts(text, 2000, 200)
        assert len(spans) <= 12, (gap, len(spans))
    text = ' '.join(f'Sentence number {i} is short.' for i in range(1000))[:20000]
    assert len(split_text(text)) <= 12
    tiny = 'Hi. ' * 5000                                  # a break every 4 characters
    spans = split_text(tiny)
    assert len(spans) <= 12
    assert all(tiny[s:e].endswith('. ') for s, e in spans[:-1])

def test_no_break_in_second_half_is_hard_cut():
    assert split_text('Hi. ' + 'x' * 3000) == [(0, 2000), (1800, 3004)]
    assert split_text('x' * 999 + '. ' + 'y' * 2000)[0] == (0, 2000)    # '. ' at 999: first half, not used
    assert split_text('x' * 1000 + '. ' + 'y' * 2000)[0] == (0, 1002)   # '. ' at 1000: second half, used

@pytest.mark.parametrize('size,overlap,msg', [(400, 200, 'more than twice'), (10, -1, 'overlap must be 0 or more'),
                                              (0, 0, 'more than twice')])
def test_bad_arguments(size, overlap, msg):
    with pytest.raises(ValueError, match=msg): split_text('some text', size, overlap)
    with pytest.raises(ValueError, match=msg): chunk_section(DocChunk('/a.txt', 'a', 'x'), size, overlap)

def section(content, **kw):
    return DocChunk('/docs/a.pdf', 'Guide', content, page_start=2, page_end=4, section_path=['Book', 'Guide'],
                    section_level=2, parent_chunk_id='doc:up', document_type='pdf', scope='admin', **kw)

@st.composite
def paged_sections(draw):
    "A section over several pages, with the offsets where each page begins"
    pages = draw(st.lists(sentences().filter(bool), min_size=1, max_size=5))
    first = draw(st.integers(1, 20))
    offsets, pos = [], 0
    for t in pages: offsets.append(pos); pos += len(t)
    starts = [[o, first + i] for i, o in enumerate(offsets)]
    return section(''.join(pages), metadata={'page_starts': starts, 'lang': 'en'}), starts

@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(paged_sections(), sizes())
def test_chunk_section_pages(sec_starts, so):
    sec, starts = sec_starts
    size, overlap = so
    before = repr(sec)
    parts = chunk_section(sec, size, overlap)
    assert repr(sec) == before                           # input untouched
    assert all('page_starts' not in p.metadata for p in parts)
    def page_at(pos): return max(pg for o, pg in starts if o <= pos)
    if len(sec.content) <= size:
        assert len(parts) == 1 and parts[0].chunk_id == sec.chunk_id and parts[0].content == sec.content
        assert (parts[0].page_start, parts[0].page_end) == (2, 4)
        assert parts[0].metadata == {'lang': 'en'}
        return
    spans = split_text(sec.content, size, overlap)
    assert [p.content for p in parts] == [sec.content[s:e] for s, e in spans]
    for i, (p, (s, e)) in enumerate(zip(parts, spans)):
        assert p.name == f'Guide (part {i+1})' and p.chunk_id == f'{sec.chunk_id}-p{i}'
        assert (p.page_start, p.page_end) == (page_at(s), page_at(e - 1))
        assert p.metadata == {'lang': 'en', 'part': i, 'parts': len(spans)}
        assert (p.file_path, p.section_path, p.section_level, p.parent_chunk_id, p.element_type, p.document_type,
                p.scope) == ('/docs/a.pdf', ['Book', 'Guide'], 2, 'doc:up', 'section', 'pdf', 'admin')
    assert parts[0].page_start == starts[0][1]
    assert [p.page_start for p in parts] == sorted(p.page_start for p in parts)
    assert all(p.page_start <= p.page_end for p in parts)

def test_page_mapping_example():
    page = lambda p: ' '.join(f'Page {p} sentence {i}.' for i in range(100)) + '\n'   # ~2,000 characters a page
    texts = [page(p) for p in (2, 3, 4)]
    starts = [[0, 2], [len(texts[0]), 3], [len(texts[0]) + len(texts[1]), 4]]
    parts = chunk_section(section(''.join(texts), metadata={'page_starts': starts}))
    assert parts[0].page_start == 2 and parts[-1].page_end == 4
    assert [(p.page_start, p.page_end) for p in parts] == [(2, 2), (2, 3), (3, 4), (4, 4)]
    for p in parts:                                      # the pages a part's sentences name lie within its range
        named = {int(n) for n in re.findall(r'(\d+) sentence', p.content)}
        assert min(named) >= p.page_start and max(named) == p.page_end
    without = chunk_section(section(''.join(texts)))
    assert all((p.page_start, p.page_end) == (2, 4) for p in without)

def test_page_starts_never_survive():
    starts = {'page_starts': [[0, 1]], 'keep': [1, 2]}
    chunks = [section('short', metadata=dict(starts)), section('Long. ' * 1000, metadata=dict(starts)),
              section('no metadata')]
    out = chunk_all(chunks)
    assert out and all('page_starts' not in c.metadata for c in out)
    assert all(c.metadata.get('keep') == [1, 2] for c in out[:-1])
    assert all('page_starts' in c.metadata for c in chunks[:2])   # inputs untouched
    out[0].metadata['keep'].append(3)
    assert chunks[0].metadata['keep'] == [1, 2]                   # metadata is a copy

def test_chunk_all_order_and_ids():
    a, b, c = section('A. ' * 10), section('B. ' * 1500), replace(section('C.'), name='Other')
    out = chunk_all([a, b, c])
    assert out[0].chunk_id == a.chunk_id and out[-1].chunk_id == c.chunk_id
    mid = out[1:-1]
    assert len(mid) >= 3 and [p.chunk_id for p in mid] == [f'{b.chunk_id}-p{i}' for i in range(len(mid))]
    assert len({p.chunk_id for p in out}) == len(out)
    assert chunk_all([a, b, c]) == out                            # deterministic
