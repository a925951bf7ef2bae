"""The secrecy scan that runs after every API test (tests/api/conftest.py) finds a planted key."""

import sqlite3

KEY = "sk-test-PLANTED-987"


def test_scan_finds_a_planted_key_in_any_file_including_sqlite(tmp_path, secret_scan):
    (tmp_path / "mlruns" / "1" / "params").mkdir(parents=True)
    (tmp_path / "mlruns" / "1" / "params" / "model").write_text("openai:m@http://h/v1")
    (tmp_path / "report.html").write_text("<p>no secret here</p>")
    assert secret_scan(tmp_path, KEY) == []

    db = tmp_path / "prefect" / "results.sqlite"
    db.parent.mkdir()
    with sqlite3.connect(db) as con:
        con.execute("CREATE TABLE answers (k TEXT, v BLOB)")
        con.executemany("INSERT INTO answers VALUES (?, ?)", [(f"k{i}", b"x" * 5000) for i in range(50)]
                        + [("auth", f"Bearer {KEY}")])
    con.close()
    log = tmp_path / "logs" / "deep" / "run.log"
    log.parent.mkdir(parents=True)
    log.write_bytes(f"header: {KEY}".encode("utf-16-le"))
    assert secret_scan(tmp_path, KEY) == sorted([db, log])
    assert secret_scan(tmp_path, "sk-test-OTHER") == []
