import os, sys
from pathlib import Path
import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent/'shared'

@pytest.fixture
def home(tmp_path, monkeypatch):
    "A fresh multis home for one test"
    h = tmp_path/'home'
    monkeypatch.setenv('MULTIS_HOME', str(h))
    return h

@pytest.fixture
def shared_docs():
    d = SHARED/'docs'
    if not d.is_dir(): pytest.skip('../shared/docs is absent')
    return d

@pytest.fixture
def scifact():
    d = SHARED/'eval'/'scifact'
    if not d.is_dir(): pytest.skip('../shared/eval/scifact is absent')
    return d

@pytest.fixture
def data_store(tmp_path):
    "A Store on a real database file with the sample documents of data/ indexed into kb"
    from multis.retrieval.store import Store
    from multis.documents.indexer import index_directory
    with Store(tmp_path/'multis.db') as st:
        index_directory(st, REPO/'data', 'kb', progress=False)
        yield st
