"""Voice notes and photos through the fake Bot API and the real python-telegram-bot; transcription through the fake
OpenAI-compatible server and the real openai client: a photographed recipe is searchable, a spoken question is answered
from the documents, and every failure is one line with nothing lost"""
import asyncio, itertools, shutil, subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
import pymupdf, pytest
from multis.answer.transcribe import NO_PROVIDER, NOT_AUDIO
from multis.config import DEFAULT_CONFIG, deep_merge
from multis.documents.ocr import OcrOptions, ocr_problem
from multis.memory.chat import ChatMemory
from multis.testing.fake_llm import FakeLLMServer
from multis.testing.fake_telegram import FakeBotAPI
from multis.testing.fake_beeper import FakeBeeperAPI
from multis.testing.providers import FakeProvider
from multis.chat.router import Router
from multis.platforms.telegram import TelegramPlatform
from multis.platforms.beeper import BeeperPlatform

OWNER = 100
QUESTION = 'what do I need for the roast tomato soup'
needs_tesseract = pytest.mark.skipif(ocr_problem(OcrOptions()) is not None,
                                     reason=f"Tesseract with English data is not installed: {ocr_problem(OcrOptions())}")
needs_ffmpeg = pytest.mark.skipif(not (shutil.which('ffmpeg') and shutil.which('ffprobe')), reason='ffmpeg (and ffprobe) not installed')
needs_speech = pytest.mark.skipif(not (shutil.which('espeak-ng') and shutil.which('ffmpeg') and shutil.which('ffprobe')),
                                  reason='espeak-ng and ffmpeg are needed to make a real voice note')


def voice_note(tmp_path:Path, text:str=QUESTION, name:str='said')->bytes:
    "`text` spoken by espeak-ng, encoded as Telegram voice notes are: OGG/Opus, mono"
    wav, ogg = tmp_path/f'{name}.wav', tmp_path/f'{name}.ogg'
    subprocess.run(['espeak-ng', '-w', str(wav), text], check=True, capture_output=True, timeout=60)
    subprocess.run(['ffmpeg', '-nostdin', '-v', 'error', '-y', '-i', str(wav), '-ac', '1', '-c:a', 'libopus', '-b:a', '24k', str(ogg)],
                   check=True, capture_output=True, timeout=60)
    return ogg.read_bytes()


def photo_jpeg(lines:list, dpi:int=150)->bytes:
    "A JPEG of `lines` of text, as a phone camera would send a page"
    doc = pymupdf.open(); p = doc.new_page()
    for i, line in enumerate(lines): p.insert_text((72, 100 + 24*i), line, fontsize=16)
    return p.get_pixmap(dpi=dpi).tobytes('jpg', jpg_quality=85)


class World:
    "Fake Bot API and transcription servers, a router on a temporary home with the sample documents, Telegram between"
    def __init__(self, home, store, transcription:dict|None, **over):
        self.srv, self.stt = FakeBotAPI().start(), FakeLLMServer().start()
        self.stt.transcript = QUESTION
        tg = {'platforms': {'telegram': {'enabled': True, 'bot_token': self.srv.token, 'base_url': self.srv.base_url}}}
        t = {} if transcription is None else {'transcription': {'provider': 'openai', 'base_url': f"{self.stt.url}/v1", **transcription}}
        cfg = deep_merge(DEFAULT_CONFIG, {'owner_id': str(OWNER), 'memory': {'capture_threshold': 1000}, **tg, **t})
        self.cfg = deep_merge(cfg, over)
        self.model, self.home = FakeProvider(), home
        self.router = Router(store, self.cfg, home=home, provider=self.model)
        self.executor = ThreadPoolExecutor(1)
        self.tg = TelegramPlatform(self.router, self.cfg, home, executor=self.executor)

    async def wait(self, n, timeout=20)->list:
        return [m['text'] for m in await asyncio.to_thread(self.srv.wait_sent, n, timeout)]

    async def voice(self, data:bytes, **kw)->str:
        "Send a voice note from the owner; the one reply"
        k = len(self.srv.sent)
        self.srv.push_voice(OWNER, OWNER, data, **kw)
        return (await self.wait(k + 1))[k]

    async def ask(self, text:str)->str:
        k = len(self.srv.sent)
        self.srv.push_text(OWNER, OWNER, text)
        return (await self.wait(k + 1))[k]

    def audio_requests(self)->list:
        return [r for r in self.stt.requests if r['path'] == '/v1/audio/transcriptions']

    def close(self):
        self.router.close(); self.executor.shutdown(); self.srv.stop(); self.stt.stop()


@pytest.fixture
def make_world(tmp_path, data_store, monkeypatch):
    made = []
    def make(transcription:dict|None=None, **over):
        home = tmp_path/f'home{len(made)}'
        home.mkdir()
        monkeypatch.setenv('MULTIS_HOME', str(home))
        made.append(World(home, data_store, transcription, **over))
        return made[-1]
    yield make
    for w in made: w.close()


def run(w:World, scenario, timeout:float=60):
    async def main():
        await w.tg.start()
        try: await asyncio.wait_for(scenario(w), timeout)
        finally: await w.tg.stop()
    asyncio.run(main())


@needs_tesseract
def test_photographed_recipe_is_asked_kb_or_admin_then_searchable(make_world):
    jpeg = photo_jpeg(['Quince crumble', 'Four quinces, a cup of oats and the zanzibarite honey from the market.'])
    async def scenario(w):
        w.srv.push_photo(OWNER, OWNER, jpeg)
        [question] = await w.wait(1)
        assert question.startswith('Index photo_') and question.endswith('Reply kb or admin.'), question
        assert [[b['callback_data'] for b in row] for row in w.srv.sent[0]['reply_markup']['inline_keyboard']] == [['kb', 'admin']]
        assert w.srv.calls('getFile') == []                                  # nothing downloaded before the answer
        w.srv.push_callback(OWNER, OWNER, 'kb', message_id=w.srv.sent[0]['message_id'])
        indexed = (await w.wait(2))[1]
        assert indexed.startswith('Indexed photo_') and indexed.endswith('(1 chunk, kb).'), indexed
        assert [c['file_id'] for c in w.srv.calls('getFile')] == ['PHOTO2']  # the photo, not its thumbnail
        hits = await w.ask('/search zanzibarite honey')
        assert hits.startswith('1. [photo_') and 'quince' in hits.lower(), hits
    run(make_world(), scenario)


@needs_tesseract
def test_photo_with_a_caption_is_indexed_at_once(make_world):
    async def scenario(w):
        w.srv.push_photo(OWNER, OWNER, photo_jpeg(['Elderflower cordial', 'Twenty heads of elderflower and a lemon.']), caption='admin')
        [done] = await w.wait(1)
        assert done.endswith('(1 chunk, admin).'), done
        assert (await w.ask('/search elderflower')).startswith('1. [photo_')
    run(make_world(), scenario)


@needs_speech
def test_voice_note_question_is_answered_from_the_documents(make_world, tmp_path):
    ogg = voice_note(tmp_path)
    async def scenario(w):
        reply = await w.voice(ogg, duration=3)
        assert reply.startswith(f'heard: {QUESTION}\n\n'), reply
        assert 'Sources:' in reply and 'recipes.txt' in reply, reply
        assert '1 kg of ripe tomatoes' in w.model.calls[-1]['system']           # the recipe reached the model
        [req] = w.audio_requests()
        form = req['form']
        assert (form['model'], form['filename'], form['file'][:4]) == ('whisper-large-v3', 'audio.ogg', b'OggS')
        assert form['file'] == ogg                                            # the note as sent, not re-encoded
        assert req['headers']['authorization'] == 'Bearer sk-stt'
        await w.ask('and how long does it keep?')                             # the spoken question is in the window
        said = [m['content'] for m in w.model.calls[-1]['messages'] if m['role'] == 'user']
        assert said[0] == QUESTION and said[-1].endswith('and how long does it keep?'), said
    w = make_world({'model': 'whisper-large-v3', 'api_key': 'sk-stt'})
    run(w, scenario)
    mem = ChatMemory(str(OWNER), True, w.home)
    assert QUESTION in ''.join(p.read_text() for p in mem.log_dir.glob('*.md'))          # in the chat's log
    assert QUESTION in str(mem.load_recent())                                            # and its window


@needs_speech
def test_spoken_command_and_conversion_for_a_server_that_takes_only_wav(make_world, tmp_path):
    ogg = voice_note(tmp_path, 'search pairing')
    async def scenario(w):
        w.stt.transcript = lambda audio: '/search pairing' if audio[:4] == b'RIFF' else 'not wav'
        reply = await w.voice(ogg, duration=2)
        assert reply.startswith('heard: /search pairing\n\n1. [multis-handbook.pdf'), reply
        form = w.audio_requests()[0]['form']
        assert (form['filename'], form['file'][:4], form['file'][8:12]) == ('audio.wav', b'RIFF', b'WAVE')
    run(make_world({'formats': ['wav']}), scenario)


def test_no_transcription_server_gives_the_clear_reply_and_downloads_nothing(make_world):
    async def scenario(w):
        assert await w.voice(b'OggS' + bytes(2000), duration=2) == NO_PROVIDER
        assert w.srv.calls('getFile') == [] and w.audio_requests() == []
        assert 'transcription.provider' in NO_PROVIDER and 'transcription.base_url' in NO_PROVIDER
    run(make_world(), scenario)


@needs_speech
def test_every_failure_is_one_line_and_nothing_is_lost(make_world, tmp_path):
    ogg = voice_note(tmp_path)
    long_ogg = voice_note(tmp_path, ' '.join([QUESTION] * 3), 'long')
    async def scenario(w):
        replies = [await w.voice(ogg, duration=900),                        # over-long, from Telegram's figure
                   await w.voice(ogg, duration=2, file_size=30 * 2**20)]      # over-size, from Telegram's figure
        assert w.srv.calls('getFile') == []                                    # both refused before download
        replies.append(await w.voice(long_ogg, duration=1))                    # Telegram says 1 s; ffprobe finds more
        w.stt.fail(500)
        replies.append(await w.voice(ogg, duration=2))
        replies.append(await w.voice(b'this is not a sound ' * 200, duration=2))
        port = w.stt.port; w.stt.stop()
        replies.append(await w.voice(ogg, duration=2))                         # the server is down
        w.stt.start(port)
        assert all('\n' not in r and len(r) < 300 for r in replies), replies
        assert replies[0] == 'That voice note is too long to transcribe (15:00; the limit is 0:04, transcription.max_seconds).'
        assert replies[1].startswith('That voice note is too large to transcribe (30.0 MB; the limit is 1 MB')
        assert replies[2].startswith('That voice note is too long to transcribe (0:0') and 'the limit is 0:04' in replies[2], replies[2]
        assert replies[3] == 'The transcription server answered HTTP 500: internal server error'
        assert replies[4] == NOT_AUDIO
        assert replies[5].startswith('Cannot reach the transcription server 127.0.0.1'), replies[5]
        assert len(w.audio_requests()) == 1                                    # only the 500 reached the server
        ok = await w.voice(ogg, duration=2)                                     # nothing lost: the next note is answered
        assert ok.startswith(f'heard: {QUESTION}') and 'recipes.txt' in ok
        assert 'recipes.txt' in await w.ask('/search roast tomato soup')
    run(make_world({'max_seconds': 4, 'max_mb': 1}), scenario)


@needs_speech
def test_timeout_and_empty_transcript(make_world, tmp_path):
    ogg = voice_note(tmp_path)
    async def scenario(w):
        w.stt.delay = 5
        slow = await w.voice(ogg, duration=2)
        w.stt.delay, w.stt.transcript = 0, '   '
        empty = await w.voice(ogg, duration=2)
        assert slow == 'The transcription server 127.0.0.1 did not answer within 1 s (transcription.timeout).'
        assert empty == 'The transcription server heard no words in that audio.'
    run(make_world({'timeout': 1}), scenario)


def test_ffmpeg_missing_names_what_to_install(make_world, monkeypatch):
    monkeypatch.setenv('PATH', '/nonexistent')
    async def scenario(w):
        reply = await w.voice(b'OggS' + bytes(2000), duration=2)
        assert reply.startswith('Voice notes need ffmpeg') and 'apt install ffmpeg' in reply and '\n' not in reply
        assert w.audio_requests() == []
    run(make_world({'model': 'whisper-1'}), scenario)


@needs_speech
def test_beeper_voice_note_in_note_to_self_is_answered(tmp_path, data_store, monkeypatch):
    home = tmp_path/'beeper-home'
    home.mkdir()
    monkeypatch.setenv('MULTIS_HOME', str(home))
    ogg, clock, notes = voice_note(tmp_path), itertools.count(1_800_000_000).__next__, '!notes:beeper.com'
    with FakeBeeperAPI(token='tok', clock=clock) as fake, FakeLLMServer() as stt:
        stt.transcript = QUESTION
        fake.add_chat(notes, 'Notes', is_self_chat=True)
        cfg = deep_merge(DEFAULT_CONFIG, {'memory': {'capture_threshold': 1000},
                                          'platforms': {'beeper': {'enabled': True, 'url': fake.url, 'token': 'tok'}},
                                          'transcription': {'provider': 'openai', 'base_url': f'{stt.url}/v1'}})
        router = Router(data_store, cfg, home=home, provider=FakeProvider())
        bp = BeeperPlatform(router, cfg, home=home, clock=clock)
        try:
            assert bp.poll_once() == 0
            fake.push_voice(notes, ogg, duration=3)
            assert bp.poll_once() == 1
            [reply] = [t for c, t in fake.sent if c == notes]
            assert reply.startswith(f'[multis] heard: {QUESTION}\n\n') and 'recipes.txt' in reply, reply
            assert stt.requests[-1]['form']['file'] == ogg and ('GET', '/v1/assets/serve') in fake.requests
        finally: bp.close(); router.close()
