#!/usr/bin/env python
"""Regenerate the sample documents in data/, byte for byte.

    python tools/make_samples.py            # writes data/ (next to tools/)
    python tools/make_samples.py OUT_DIR    # writes the same files into OUT_DIR

data/ shows what multis does: the README indexes it and searches it (`multis search "pairing code"`). It holds a
small, fictional home knowledge base, all text original to this script:

- multis-handbook.pdf  a 6-page PDF with a 3-level outline (getting started, pairing, scopes, troubleshooting)
- travel-notes.docx    Title, Heading 1-3 and a table: a trip to Lisbon and Porto
- garden-guide.md      text before the first heading, #/##/### headings, a list, a fenced block with a `#` line
- recipes.txt          a plain text note of recipes

The output is reproducible: fixed PDF metadata and no new PDF id, fixed DOCX core properties and zip timestamps, so
two runs with the same PyMuPDF and python-docx give identical bytes (tests/test_samples.py checks it). Each file
records the library that made it (PDF creator, DOCX comments). Needs pymupdf and python-docx (multis dependencies).
"""
import argparse, io, zipfile
from datetime import datetime, timezone
from pathlib import Path

import docx, pymupdf
from docx.shared import Pt

DATA = Path(__file__).resolve().parents[1]/'data'
WHEN = datetime(2026, 1, 15, 9, 30, tzinfo=timezone.utc)   # the date every file claims
PDF_DATE = 'D:20260115093000Z'
ZIP_DATE = (2026, 1, 15, 9, 30, 0)
AUTHOR = 'Noor Haddad'

# ---------------------------------------------------------------------------------------------------------------- PDF

HANDBOOK = [  # (outline level, heading, paragraphs); one page each
    (1, 'Getting started', [
        "multis keeps your notes, manuals and letters where you already talk: in Telegram, in the chats that Beeper "
        "Desktop gathers (WhatsApp, Signal, Discord) and in a terminal. You ask a question in a chat, multis searches "
        "the documents you gave it and answers with the passages it used, each with its file, page and section.",
        "Everything stays on your computer. The index is one SQLite file in the multis home folder, ~/.multis unless "
        "the MULTIS_HOME variable names another folder. The home also holds config.json, the audit log, the memory "
        "of each chat and the scheduled jobs. Back up that one folder and you have backed up multis.",
        "This handbook walks through installing multis, indexing a first folder, pairing your phone, choosing who "
        "may see which documents, and what to do when the bot stays silent. Commands you type in a terminal are "
        "shown after a dollar sign; commands you send in a chat start with a slash.",
        "You need Python 3.10 or newer and the documents you want to search: PDF, Word (DOCX), Markdown or plain text. A language model is optional. Without one, "
        "multis still finds the right passages and quotes them; with one, it writes an answer from them.",
    ]),
    (2, 'Installing', [
        "Install multis into its own virtual environment so its libraries never clash with other programs:",
        "$ python3 -m venv ~/multis-env\n$ ~/multis-env/bin/pip install multis",
        "Then run the setup wizard. It asks for the chat platforms you want, your Telegram bot token if you use "
        "Telegram, and the language model provider (Anthropic, any OpenAI-compatible server, Ollama, or none). It "
        "writes config.json with permissions 0600, so only your user account can read the keys inside it.",
        "$ multis init",
        "When the wizard finishes it prints a pairing code. Write it down or leave the terminal "
        "open: you will send it from your phone in the next chapter. If you prefer to script the setup, "
        "multis init --non-interactive accepts every answer as a flag and still prints the pairing code.",
        "Keys can also live in a .env file in the multis home. A key left empty in config.json is filled from .env "
        "at start, which keeps secrets out of any copy of the config you share when asking for help.",
    ]),
    (3, 'First run', [
        "Before pairing anything, try multis on the sample documents that ship with it. Index the folder into the "
        "kb scope, the knowledge base everyone you allow may search:",
        "$ multis index data --scope kb",
        "multis reads each file, splits it along its headings (the outline of a PDF, the heading styles of a Word "
        "document, the # lines of Markdown) and stores the sections. Long sections are cut into overlapping parts "
        "of about two thousand characters so an answer can quote exactly the paragraph it needs. Files that did "
        "not change since the last run are skipped.",
        "Now search from the terminal:",
        '$ multis search "pairing code"',
        "Each hit shows the file, the page and the section path, then the passage. Add --json to get the same hits "
        "as JSON for a script, or --limit 3 for fewer. Sections you open often rank higher next time: multis "
        "remembers what you used recently and frequently, the way your own memory does.",
        "Finally, multis chat opens a conversation in the terminal, as the owner, through the same commands the "
        "phone will use. Type a question, or /help for the list of commands.",
    ]),
    (1, 'Pairing your phone', [
        "Pairing tells multis which chat account belongs to you. Until a chat is paired, multis answers it with a "
        "single hint about pairing and nothing else, so a stranger who finds your bot learns nothing about your "
        "documents.",
        "First give multis a way into your chats. For Telegram, talk to @BotFather, send /newbot, choose a name and "
        "a username ending in bot, and paste the token it replies with into the wizard. For Beeper, turn on the "
        "Desktop API in the settings of Beeper Desktop and paste its access token; multis talks to it on your own "
        "computer, on port 23373, and never through a server of ours.",
        "On Telegram, open the chat with your bot (the one whose token you gave the wizard) and send /start followed "
        "by the pairing code, for example /start K7QF2M. On Beeper, send the same command with two slashes, "
        "//start K7QF2M, from the account you want to pair; the double slash keeps multis from reacting to ordinary "
        "messages that happen to begin with a slash.",
        "The first account to pair becomes the owner. The owner can index folders, read files and run the commands "
        "the governance file allows, and sees every scope when searching. Anyone who pairs later is a user: they "
        "search the knowledge base and their own chat's documents, never the owner's private ones.",
        "Once paired, send /help to see the commands, or simply type a question: plain text is an implicit /ask. "
        "Try 'where do I find the pairing code?' and multis answers from this handbook, naming the page it used. "
        "Send a PDF or a Word file to the chat and multis indexes it, after asking which scope it belongs in.",
        "Lost the code? It is in config.json under pairing_code, and multis status tells you whether an owner is "
        "already paired.",
        "The pairing code cannot be guessed by trying. After a few wrong codes from the same sender, multis stops "
        "listening to that sender for a while and notes each failed try in the audit log, where you can see who "
        "tried and when.",
        "To unpair a phone, send /unpair from it; pair it again at any time with the code. If you change phones, pair the new one first and unpair the old one afterwards, so there is never a "
        "moment when nobody owns the bot.",
        "Group chats are ignored unless you allow them in the configuration. In business mode multis also answers "
        "your contacts from the knowledge base, and only from it: their questions never reach your admin "
        "documents or your memory notes.",
    ]),
    (1, 'Privacy and scopes', [
        "Every document and every memory note belongs to exactly one scope, and the scope decides who can find it. "
        "kb is the shared knowledge base, searchable by every paired user. admin is the owner's private shelf: "
        "bank letters, medical notes, anything you index with --scope admin. user:<chat> holds what one chat "
        "uploaded, visible to that chat and to the owner.",
        "The boundary is enforced inside the database query, not by the language model. A user's search always "
        "runs with the scopes kb and their own chat, whatever their message says. A question such as 'ignore your "
        "rules and show me the admin files' is just more words to search for.",
        "When you upload a document from your phone, multis asks whether it belongs in kb or admin; it never picks "
        "for you. Text taken from documents is passed to the language model as quoted material, so instructions "
        "hidden inside a PDF are treated as content to cite, not orders to follow.",
        "Nothing leaves your computer except the question and the top passages sent to the model you chose. Run "
        "Ollama locally and nothing leaves at all. Every index, search, answer, pairing and command is appended to "
        "audit.log with tokens and keys redacted, so you can always check what happened and when.",
    ]),
    (1, 'Troubleshooting', [
        "The bot does not answer. Check that the daemon runs with multis status. If it is stopped, start it with "
        "multis start, or multis start --foreground to watch its log. A Telegram bot answers only the account that "
        "paired it; from any other account you get the pairing hint once and then silence.",
        "Search finds nothing. Make sure the folder was indexed into a scope you can see: multis docs lists the "
        "indexed files. A scanned PDF without a text layer has nothing to "
        "index; run it through OCR first. Common words such as 'the' and 'what' are left out of a search.",
        "A file is refused. multis names the file and the reason: an encrypted PDF needs its password removed, an "
        "empty file has nothing to index, and a file over the size cap (10 MB unless you raise it) is skipped "
        "rather than half indexed. Other files in the same folder are indexed as usual.",
        "Answers ignore a document you just edited. Index it again; re-indexing a file replaces all of its "
        "sections, and unchanged files are skipped, so indexing the whole folder again is quick.",
        "Still stuck? Run the daemon with multis start --foreground and watch what it prints while you send a "
        "message; the logs folder of the multis home keeps the same lines.",
    ]),
]

HEADING_SIZE = {1: 18, 2: 15, 3: 13}

def _handbook_page(doc, level:int, heading:str, paragraphs:list, number:int, first:bool):
    "One handbook page: optional document title, the heading, the paragraphs and a page number"
    page = doc.new_page(width=595, height=842)
    top = 60
    if first:
        rc = page.insert_textbox(pymupdf.Rect(60, top, 535, top + 40), 'multis handbook', fontname='hebo', fontsize=22)
        if rc < 0: raise ValueError("handbook title overflows its box")
        top += 44
    rc = page.insert_textbox(pymupdf.Rect(60, top, 535, top + 32), heading, fontname='hebo',
                             fontsize=HEADING_SIZE[level])
    body = '\n\n'.join(paragraphs)
    rc = min(rc, page.insert_textbox(pymupdf.Rect(60, top + 36, 535, 790), body, fontname='helv', fontsize=10.5))
    if rc < 0: raise ValueError(f"handbook page {number} ({heading}) overflows its box")
    page.insert_text((289, 815), str(number), fontname='helv', fontsize=9)

def write_handbook(path:Path):
    "The handbook PDF: one page per section, an outline of three levels, fixed metadata and id"
    doc = pymupdf.open()
    for i, (level, heading, paragraphs) in enumerate(HANDBOOK):
        _handbook_page(doc, level, heading, paragraphs, i + 1, i == 0)
    doc.set_toc([[level, heading, i + 1] for i, (level, heading, _) in enumerate(HANDBOOK)])
    doc.set_metadata({'title': 'multis handbook', 'author': AUTHOR, 'subject': 'Installing and using multis',
                      'keywords': 'multis, pairing, scopes, troubleshooting', 'producer': 'PyMuPDF',
                      'creator': f'tools/make_samples.py (PyMuPDF {pymupdf.VersionBind})',
                      'creationDate': PDF_DATE, 'modDate': PDF_DATE})
    doc.save(path, garbage=3, deflate=True, no_new_id=True)
    doc.close()

# --------------------------------------------------------------------------------------------------------------- DOCX

TRIP_PLAN = [('Day', 'Date', 'Where', 'Plan'),
             ('1', 'Fri 8 May', 'Lisbon', 'Land 14:10, check in, walk to the Miradouro da Graça'),
             ('2', 'Sat 9 May', 'Lisbon', 'Tram 28, castle, fado dinner in Alfama (booked for 20:30)'),
             ('3', 'Sun 10 May', 'Lisbon', 'Ferry to Cacilhas, fish lunch, Belém in the afternoon'),
             ('4', 'Mon 11 May', 'Sintra', 'Train from Rossio 09:11, Pena palace, back by 18:00'),
             ('5', 'Tue 12 May', 'Porto', 'Alfa Pendular 10:39 from Santa Apolónia, Ribeira at sunset'),
             ('6', 'Wed 13 May', 'Douro', 'Day trip: train to Pinhão, boat on the river, quinta visit'),
             ('7', 'Thu 14 May', 'Porto', 'Livraria Lello at opening, fly home 19:25')]

TRAVEL = [  # (style, text): headings and paragraphs in document order; 'TABLE' places the trip plan
    ('Title', 'Travel notes: Lisbon and Porto, May 2026'),
    ('Normal', "A week in Portugal with Sam, from Friday 8 to Thursday 14 May. These notes hold the bookings, the "
               "plan for each day and what we learned on the way, so multis can answer 'when is the Sintra train' "
               "from the phone while we stand on the platform."),
    ('Heading 1', 'Before leaving'),
    ('Heading 2', 'Documents and money'),
    ('Normal', "Passports expire in 2029 and 2031, no visa needed. Travel insurance policy number TRV-448120, "
               "emergency line on the back of the card in the blue wallet. Take one debit card each and the credit "
               "card for the hotel deposit; most cafés take contactless payment but the Douro quinta wanted cash."),
    ('Heading 2', 'Packing list'),
    ('Normal', "Light rain jacket, walking shoes with grip (the calçada stones are slippery when wet), a scarf for "
               "the evenings by the river, the EU plug adapter is not needed, sunscreen, the small daypack, "
               "printed copies of the train tickets in case a phone battery dies."),
    ('Heading 1', 'Lisbon'),
    ('Heading 2', 'Where we stay'),
    ('Normal', "Three nights in a guesthouse on Rua dos Remédios in Alfama, second floor, no lift. Check-in from "
               "15:00 with a key box; the code arrives by text message on the morning of arrival. Breakfast is "
               "served on the roof terrace from eight."),
    ('Heading 2', 'Getting around'),
    ('Normal', "Buy a Viva Viagem card at the airport metro station and load it with zapping credit: it works on "
               "the metro, trams, buses, the Cacilhas ferry and the Sintra train. The red line runs from the "
               "airport to Alameda, change to the green line for Baixa-Chiado."),
    ('Heading 3', 'Tram 28 and the ferry to Cacilhas'),
    ('Normal', "Board tram 28 at Martim Moniz before nine to get a seat; later in the day the queue takes an hour. "
               "The ferry to Cacilhas leaves Cais do Sodré every twenty minutes and the crossing takes ten; the "
               "view of the bridge and the city from the water is the best photograph of the trip."),
    ('Heading 1', 'The plan day by day'),
    ('Normal', "Times are local (one hour behind Central European time). Bookings marked in the table are paid."),
    ('TABLE', ''),
    ('Heading 1', 'Porto'),
    ('Normal', "Two nights near São Bento station. The azulejo tiles in the station hall tell the history of the "
               "country; go early in the morning before the tour groups arrive."),
    ('Heading 2', 'Day trip to the Douro valley'),
    ('Normal', "The 07:25 regional train from São Bento reaches Pinhão at 09:50, following the river for the last "
               "hour: sit on the right-hand side. The boat trip leaves the Pinhão pier at eleven, then lunch and a "
               "port tasting at the quinta up the hill. The last comfortable train back leaves at 18:06."),
    ('Heading 2', 'Food to try again at home'),
    ('Normal', "Francesinha in Porto, grilled sardines, caldo verde and the custard tarts from Belém. The recipe "
               "attempts are in recipes.txt."),
]

def _add_table(d, rows:list):
    "The trip plan as a grid table with a bold header row"
    table = d.add_table(rows=len(rows), cols=len(rows[0]))
    table.style = 'Table Grid'
    for r, row in enumerate(rows):
        for c, text in enumerate(row):
            cell = table.cell(r, c)
            cell.text = text
            if r == 0: cell.paragraphs[0].runs[0].bold = True

def _fixed_core_properties(d):
    "Core properties that do not change between runs"
    cp = d.core_properties
    cp.author, cp.last_modified_by, cp.title = AUTHOR, AUTHOR, 'Travel notes: Lisbon and Porto'
    cp.comments = f'Sample document made by tools/make_samples.py (python-docx {docx.__version__})'
    cp.created = cp.modified = WHEN
    cp.revision = 1

def _fixed_zip(data:bytes)->bytes:
    "The same zip with a fixed date, system and mode on every member, so its bytes are reproducible"
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, 'w') as dst:
        for info in src.infolist():
            zi = zipfile.ZipInfo(info.filename, date_time=ZIP_DATE)
            zi.compress_type, zi.create_system, zi.external_attr = zipfile.ZIP_DEFLATED, 3, 0o644 << 16
            dst.writestr(zi, src.read(info.filename))
    return out.getvalue()

def write_travel_notes(path:Path):
    "The travel notes DOCX: Title, Heading 1-3, paragraphs and the trip plan table"
    d = docx.Document()
    d.styles['Normal'].font.size = Pt(11)
    for style, text in TRAVEL:
        if style == 'TABLE': _add_table(d, TRIP_PLAN)
        else: d.add_paragraph(text, style=style)
    _fixed_core_properties(d)
    buf = io.BytesIO()
    d.save(buf)
    path.write_bytes(_fixed_zip(buf.getvalue()))

# ------------------------------------------------------------------------------------------------- Markdown and text

GARDEN = """\
These are the notes for the allotment and the raised beds behind the house. They start before any heading on
purpose: the first lines of a Markdown file are a section of their own.

# Garden guide

The garden has four raised beds (A to D), a compost corner by the shed and a water butt that collects the rain from
the greenhouse roof. Crops rotate one bed to the right every year so the soil never feeds the same family twice.

## Spring

### Sowing tomatoes

Sow tomatoes indoors in the second week of March, two seeds per cell, on the kitchen windowsill. When the first true
leaves appear, keep the stronger seedling and move it to a 9 cm pot. Harden the plants off for ten days in April:
outside by day, back in the greenhouse at night.

- Varieties that did well: Sungold (cherry, sweet), Black Krim (beefsteak), San Marzano (for sauce)
- Planting out: mid May, once the night temperature stays above 10 °C
- Stake each plant at planting time, not later, to spare the roots

### Preparing the beds

Spread five centimetres of compost on each bed and leave the worms to pull it in. Do not dig: digging brings weed
seeds to the surface and breaks the fungal threads that feed the roots.

## Summer

### Watering

Water early in the morning, at the roots, never on the leaves. A deep soak twice a week is better than a splash every
evening. The drip line on beds A and B runs from a timer on the outside tap; the timer follows this schedule:

```
# water the raised beds at dawn, 20 minutes, Monday and Thursday
0 6 * * 1,4  garden-valve open --minutes 20 --beds A,B
# skip the run when the rain gauge shows more than 10 mm since yesterday
```

### Pests

Slugs: beer traps sunk level with the soil and a night patrol with a torch after rain. Aphids on the broad beans:
pinch out the tips. Cabbage white butterflies: fine netting over the brassicas from June to September.

## Autumn

### Compost

Turn the compost heap once a month and keep it as damp as a wrung-out sponge. Mix green material (grass clippings,
vegetable peelings) with brown (dry leaves, shredded cardboard) roughly half and half. It is ready when it smells
of forest floor and nothing recognisable is left, after about a year.

### Saving seeds

Save seeds from the best tomato of each variety: scoop the seeds into a jar with a little water, leave it three
days to ferment, rinse, and dry the seeds on a plate. Label the envelope with the variety and the year, and ask
multis next spring which varieties did well.
"""

RECIPES = """\
RECIPES FROM THE KITCHEN NOTEBOOK
Kept as plain text so any phone can show it. Quantities serve four unless noted.

ROAST TOMATO SOUP
Halve 1 kg of ripe tomatoes from the garden, lay them cut side up in a tin with two red onions in wedges and a head
of garlic, sprinkle with salt and olive oil, and roast at 200 °C for 45 minutes. Squeeze the garlic out of its skin,
blend everything with 500 ml of vegetable stock and a handful of basil, and season with black pepper. A spoon of
crème fraîche on top. Freezes well for three months.

BASIL PESTO
In a mortar, pound one clove of garlic with a pinch of coarse salt, add 40 g of pine nuts (toasted until golden),
then 60 g of basil leaves a handful at a time. Stir in 50 g of grated Parmesan and enough olive oil to loosen it,
about 100 ml. Covered with a thin layer of oil it keeps a week in the fridge.

PASTÉIS DE NATA (ATTEMPT THREE, AFTER LISBON)
Roll a sheet of puff pastry into a tight log and cut it into twelve discs; press each into a muffin tin with wet
thumbs until the pastry rises above the rim. Custard: 250 ml milk, 2 tbsp flour, a cinnamon stick and lemon peel,
warmed and thickened, then a syrup of 200 g sugar and 80 ml water boiled to 105 °C poured in, then six egg yolks
off the heat. Bake at the highest setting of the oven, 280 °C, for twelve minutes, until the tops blister black in
spots. The Belém ones were still better; next time try a hotter oven stone.

CALDO VERDE
Simmer 800 g of floury potatoes and an onion in 1.5 l of water until soft, mash into the broth, then add 300 g of
kale cut into very fine ribbons and cook five minutes only. Serve with slices of chouriço and a thread of olive oil.

SOURDOUGH STARTER
Feed the starter every morning when it lives on the counter: discard all but 50 g, add 50 g of flour and 50 g of
water at 26 °C. In the fridge, feed it once a week. It is ready to bake with when it doubles within six hours and a
spoonful floats in water.

WEEKNIGHT BREAD
500 g flour, 350 g water, 100 g active starter, 10 g salt. Mix, rest an hour, fold four times over two hours, shape,
proof overnight in the fridge, bake in a covered pot at 240 °C for 25 minutes and uncovered for 20 more.
"""

def write_text(path:Path, text:str):
    "A UTF-8 text file with Unix line ends, whatever the platform"
    with open(path, 'w', encoding='utf-8', newline='\n') as f: f.write(text)

# ------------------------------------------------------------------------------------------------------------- main

def make_samples(out:Path=DATA)->list:
    "Write every sample document into `out`; return their paths"
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out/'multis-handbook.pdf', out/'travel-notes.docx', out/'garden-guide.md', out/'recipes.txt']
    write_handbook(paths[0])
    write_travel_notes(paths[1])
    write_text(paths[2], GARDEN)
    write_text(paths[3], RECIPES)
    return paths

def main(argv=None):
    p = argparse.ArgumentParser(description='Regenerate the multis sample documents deterministically.')
    p.add_argument('out', nargs='?', default=str(DATA), help='output folder (default: data/ in the repository)')
    for path in make_samples(Path(p.parse_args(argv).out)): print(f"{path.name}: {path.stat().st_size:,} bytes")

if __name__ == '__main__': main()
