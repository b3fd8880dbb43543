"""IAM-OnDB readers (lnorm.data.iamondb) and stroke helpers on files the tests write."""

import os
import tarfile

import numpy as np
import pytest

from lnorm import data
from lnorm.data import iamondb
from lnorm.data import strokes
from lnorm.data.core import DatasetNotFoundError, MalformedDataError


def stroke_xml(strokes_xy) -> str:
  body = []
  for stroke in strokes_xy:
    pts = "".join(f'<Point x="{x}" y="{y}" time="0.{i}"/>' for i, (x, y) in enumerate(stroke))
    body.append(f'<Stroke colour="black" start_time="0" end_time="1">{pts}</Stroke>')
  return ('<?xml version="1.0" encoding="ISO-8859-1"?><WhiteboardCaptureSession>'
          '<WhiteboardDescription><SensorLocation corner="top_left"/></WhiteboardDescription>'
          f'<StrokeSet>{"".join(body)}</StrokeSet></WhiteboardCaptureSession>')


def ascii_txt(lines) -> str:
  return "OCR:\n\nsome ocr text\n\nCSR:\n\n" + "\n".join(lines) + "\n"


def write_tree(root, forms):
  """forms: {form_id: (csr lines, [line strokes])} in the distribution's layout."""
  for form, (csr, lines) in forms.items():
    writer, text = form[:3], form[:7]
    adir = root / "ascii" / writer / text
    adir.mkdir(parents=True, exist_ok=True)
    (adir / f"{form}.txt").write_text(ascii_txt(csr))
    sdir = root / "lineStrokes" / writer / text
    sdir.mkdir(parents=True, exist_ok=True)
    for n, line in enumerate(lines, 1):
      (sdir / f"{form}-{n:02d}.xml").write_text(stroke_xml(line))


def tar_dir(src, dest):
  with tarfile.open(dest, "w:gz") as tf:
    tf.add(src, arcname=os.path.basename(src))


def forms_fixture(num_forms=12):
  """Two transcribed lines per form (texts 'first X' and 'second X', X a letter naming
  the form) and a third stroke file without a transcription line."""
  rng = np.random.default_rng(0)
  forms = {}
  for f in range(num_forms):
    lines = [[[tuple(int(v) for v in rng.integers(0, 500, 2)) for _ in range(4)]
              for _ in range(3)] for _ in range(2)]
    lines.append([[(1, 1), (2, 2)]])
    name = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"[f]
    forms[f"a{f:02d}-000u"] = ([f"first {name}", f"second {name}"], lines)
  return forms


def decode(ids, n):
  return "".join(strokes.ALPHABET[i - 1] if i else "?" for i in ids[:n])


def line_offsets(line):
  return strokes.points_to_offsets(np.array(
      [(x, y, int(j == len(st) - 1)) for st in line for j, (x, y) in enumerate(st)]))


def test_parse_line_strokes_flags_stroke_ends():
  xml = stroke_xml([[(10, 20), (13, 24)], [(40, 20), (41, 19), (45, 30)]]).encode()
  points = iamondb.parse_line_strokes(xml, "x.xml")
  np.testing.assert_array_equal(points, [[10, 20, 0], [13, 24, 1], [40, 20, 0], [41, 19, 0],
                                         [45, 30, 1]])
  offsets = strokes.points_to_offsets(points)
  np.testing.assert_array_equal(offsets, [[3, 4, 1], [27, -4, 0], [1, -1, 0], [4, 11, 1]])
  np.testing.assert_array_equal(strokes.offsets_to_points(offsets)[:, :2],
                                points[:, :2] - points[0, :2])


@pytest.mark.parametrize("bad, problem", [
    (b"<WhiteboardCaptureSession><StrokeSet><Stroke>", "not well-formed XML"),
    (b"<WhiteboardCaptureSession></WhiteboardCaptureSession>", "no <StrokeSet>"),
    (b'<W><StrokeSet><Stroke><Point x="1" y="a"/></Stroke></StrokeSet></W>', "no numeric x"),
    (b"<W><StrokeSet></StrokeSet></W>", "no <Stroke>"),
])
def test_parse_line_strokes_malformed_names_file(bad, problem):
  with pytest.raises(MalformedDataError, match=rf"a01-000u-01\.xml.*{problem}"):
    iamondb.parse_line_strokes(bad, "lineStrokes/a01/a01-000/a01-000u-01.xml")


def test_parse_transcription_reads_csr_section_only():
  lines = iamondb.parse_transcription(ascii_txt(["A MOVE to stop", "", "Mr . Gaitskell"]),
                                      "f.txt")
  assert lines == ["A MOVE to stop", "Mr . Gaitskell"]
  with pytest.raises(MalformedDataError, match=r"f\.txt.*no 'CSR:' section"):
    iamondb.parse_transcription("OCR:\n\nsome text\n", "f.txt")


def test_encode_text_maps_unknown_to_other():
  ids = strokes.encode_text("a Z.7")
  alphabet = strokes.ALPHABET
  assert strokes.alphabet_size() == 57
  np.testing.assert_array_equal(
      ids, [alphabet.index("a") + 1, 1, alphabet.index("Z") + 1, alphabet.index(".") + 1,
            strokes.OTHER])


def test_downsample_keeps_every_nth_point_and_stroke_ends():
  points = np.array([[0, 0, 0], [1, 0, 0], [2, 0, 0], [3, 0, 0], [4, 1, 1],  # stroke 1
                     [10, 0, 0], [11, 0, 1],  # stroke 2
                     [20, 0, 0], [21, 0, 0], [22, 0, 0], [23, 5, 1]])  # stroke 3
  thinned = strokes.offsets_to_points(strokes.downsample(strokes.points_to_offsets(points), 2))
  np.testing.assert_array_equal(thinned, [[0, 0, 0], [2, 0, 0], [4, 1, 1], [10, 0, 0],
                                          [11, 0, 1], [20, 0, 0], [22, 0, 0], [23, 5, 1]])
  offsets = strokes.points_to_offsets(points)
  np.testing.assert_array_equal(strokes.downsample(offsets, 1), offsets)


def test_clean_lines_drops_outliers_and_truncates_or_drops_long_lines():
  ok = np.ones((5, 3), np.float32)
  glitch = ok.copy()
  glitch[2, 0] = 5000.0
  long = np.ones((12, 3), np.float32)
  lines, texts = [ok, glitch, long, ok[:1]], ["a", "b", "c", "d"]
  kept, fitted, report = strokes.clean_lines(lines, texts, max_offset=100.0, max_points=10,
                                             long_lines="truncate")
  np.testing.assert_array_equal(kept, [0, 2])
  assert [len(l) for l in fitted] == [5, 10]
  assert (report.dropped_outlier, report.dropped_empty, report.truncated_long) == (1, 1, 1)
  kept, _, report = strokes.clean_lines(lines, texts, max_offset=100.0, max_points=10,
                                        long_lines="drop")
  np.testing.assert_array_equal(kept, [0])
  assert report.dropped_long == 1


@pytest.mark.parametrize("archived", [False, True])
def test_files_source_pairs_lines_splits_by_form_and_scales(tmp_path, archived):
  root = tmp_path / "iamondb"
  forms = forms_fixture()
  write_tree(root, forms)
  if archived:
    tar_dir(str(root / "lineStrokes"), str(root / iamondb.STROKES_ARCHIVE))
    tar_dir(str(root / "ascii"), str(root / iamondb.ASCII_ARCHIVE))
    for sub in ("lineStrokes", "ascii"):
      os.rename(root / sub, tmp_path / f"moved_{sub}")
  config = {"data_dir": str(tmp_path), "source": "files", "cache_dir": str(tmp_path / "cache"),
            "validation_fraction": 0.2, "test_fraction": 0.2, "max_points": 16}
  ds = data.load("iamondb", config)
  assert ds.source == "files"
  where = {}  # text -> (split, row)
  for split, arrays in ds.splits.items():
    for row, (ids, n) in enumerate(zip(arrays["text"], arrays["text_length"])):
      where[decode(ids, n)] = (split, row)
  # 12 forms x 2 transcribed lines; the third stroke files are skipped and counted.
  assert len(where) == 24
  assert "12 stroke files without a CSR transcription line skipped" in ds.notes
  by_text = {}
  for _, (csr, lines) in forms.items():
    for text, line in zip(csr, lines):
      by_text[text] = line_offsets(line)
      # Both lines of a form land in one split.
      assert where[text][0] == where[csr[0]][0]
  assert all(ds.num_examples(s) > 0 for s in ("train", "validation", "test"))
  scale = np.concatenate([o for t, o in by_text.items() if where[t][0] == "train"])[:, :2].std(0)
  np.testing.assert_allclose(ds.info["offset_scale"], scale, rtol=1e-5)
  for text, expected in by_text.items():
    split, row = where[text]
    arrays = ds.splits[split]
    assert arrays["length"][row] == len(expected) == 11
    np.testing.assert_allclose(arrays["strokes"][row, :11, :2], expected[:, :2] / scale,
                               rtol=1e-5)
    np.testing.assert_array_equal(arrays["strokes"][row, :11, 2], expected[:, 2])
    assert not arrays["strokes"][row, 11:].any()
  if archived:  # Parsed once, then read from the cache.
    assert os.listdir(tmp_path / "cache")
    again = data.load("iamondb", config)
    np.testing.assert_array_equal(again.splits["train"]["strokes"], ds.splits["train"]["strokes"])


@pytest.mark.parametrize("archived", [False, True])
def test_a_missing_transcription_file_is_named_apart_from_lines_without_csr(
    tmp_path, caplog, archived):
  """Deleting one form's ascii file drops its lines; the warning and the notes (which
  go into config.json) name them and say why, apart from the stroke files that have
  no CSR line in a transcription that is there."""
  root = tmp_path / "iamondb"
  write_tree(root, forms_fixture(4))
  config = {"data_dir": str(tmp_path), "source": "files", "cache_dir": str(tmp_path / "cache"),
            "validation_fraction": 0.25, "test_fraction": 0.25}
  complete = data.load("iamondb", config)
  os.remove(root / "ascii/a02/a02-000/a02-000u.txt")
  if archived:
    tar_dir(str(root / "lineStrokes"), str(root / iamondb.STROKES_ARCHIVE))
    tar_dir(str(root / "ascii"), str(root / iamondb.ASCII_ARCHIVE))
    for sub in ("lineStrokes", "ascii"):
      os.rename(root / sub, tmp_path / f"moved_{sub}")
  for attempt in ("parsed", "cached"):
    caplog.clear()
    with caplog.at_level("WARNING", logger="lnorm.data.iamondb"):
      ds = data.load("iamondb", config)
    assert sum(ds.num_examples(s) for s in ds.splits) == 6, attempt  # 3 forms x 2 lines.
    (warning,) = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    for text in (warning, ds.notes, ds.describe()["notes"]):
      assert ("3 stroke files skipped because their form's transcription file "
              "ascii/<...>/<form>.txt is missing, in 1 form: a02-000u (a02-000u-01, "
              "a02-000u-02, a02-000u-03)") in text
      # The other three forms' third stroke files have no CSR line: another reason.
      assert ("3 stroke files without a CSR transcription line skipped: their form's "
              "transcription has fewer CSR lines") in text
      assert "a00-000u-03, a01-000u-03, a03-000u-03" in text
  assert "missing" not in complete.notes
  assert "4 stroke files without a CSR transcription line skipped" in complete.notes


def test_describe_skipped_counts_what_it_does_not_name():
  assert iamondb.describe_skipped([], []) == ""
  many = [f"a00-000u-{i:02d}" for i in range(1, 31)]
  text = iamondb.describe_skipped([], many)
  assert text.startswith("30 stroke files without a CSR transcription line skipped")
  assert text.endswith("a00-000u-20 and 10 more") and "a00-000u-21" not in text


def test_files_source_malformed_xml_names_the_member(tmp_path):
  root = tmp_path / "iamondb"
  write_tree(root, forms_fixture(2))
  (root / "lineStrokes/a01/a01-000/a01-000u-02.xml").write_text("<Whiteboard><StrokeSet>")
  tar_dir(str(root / "lineStrokes"), str(root / iamondb.STROKES_ARCHIVE))
  tar_dir(str(root / "ascii"), str(root / iamondb.ASCII_ARCHIVE))
  config = {"data_dir": str(tmp_path), "source": "files", "use_cache": False}
  with pytest.raises(MalformedDataError, match=r"lineStrokes-all\.tar\.gz:lineStrokes/a01/"
                     r"a01-000/a01-000u-02\.xml.*not well-formed XML"):
    data.load("iamondb", config)


def test_missing_files_lists_where_it_looked(tmp_path):
  with pytest.raises(DatasetNotFoundError, match=r"lineStrokes-all\.tar\.gz"):
    data.load("iamondb", {"data_dir": str(tmp_path), "source": "auto"})


def test_strokes_npy_source_reorders_columns(tmp_path):
  root = tmp_path / "iamondb"
  root.mkdir()
  rng = np.random.default_rng(1)
  lines = [np.concatenate([rng.integers(0, 2, (n, 1)), rng.normal(size=(n, 2))], 1)
           .astype(np.float32) for n in (5, 7, 9, 4, 6)]
  arr = np.empty(len(lines), object)
  arr[:] = lines
  np.save(root / "strokes.npy", arr, allow_pickle=True)
  (root / "sentences.txt").write_text("\n".join(["a b", "cd", "ef g", "h", "ij"]) + "\n")
  ds = data.load("iamondb", {"data_dir": str(tmp_path), "source": "strokes_npy",
                             "validation_fraction": 0.2, "test_fraction": 0.2})
  assert ds.source == "strokes_npy"
  assert sum(ds.num_examples(s) for s in ds.splits) == 5
  scale = np.asarray(ds.info["offset_scale"])
  for s, arrays in ds.splits.items():
    for row in range(len(arrays["length"])):
      n = arrays["length"][row]
      source = next(l for l in lines if len(l) == n)
      np.testing.assert_allclose(arrays["strokes"][row, :n, :2] * scale, source[:, 1:], rtol=1e-5)
      np.testing.assert_array_equal(arrays["strokes"][row, :n, 2], source[:, 0])
  (root / "sentences.txt").write_text("only one line\n")
  with pytest.raises(MalformedDataError, match=r"sentences\.txt.*1 lines, but .*5 stroke"):
    data.load("iamondb", {"data_dir": str(tmp_path), "source": "strokes_npy"})


def _object_array(items):
  arr = np.empty(len(items), object)
  arr[:] = items
  return arr


@pytest.mark.parametrize("write, problem", [
    (lambda path: path.write_text("not a numpy file"), "cannot be read by numpy.load"),
    (lambda path: np.save(path, _object_array([np.zeros((4, 3)), np.zeros((5, 2))]),
                          allow_pickle=True), r"entry 1 has shape \(5, 2\)"),
    (lambda path: np.save(path, _object_array([np.zeros((4, 3)), "text"]), allow_pickle=True),
     "entry 1 is not a numeric array"),
])
def test_strokes_npy_malformed_names_the_file(tmp_path, write, problem):
  root = tmp_path / "iamondb"
  root.mkdir()
  write(root / "strokes.npy")
  (root / "sentences.txt").write_text("ab\ncd\n")
  with pytest.raises(MalformedDataError, match=rf"strokes\.npy.*{problem}"):
    data.load("iamondb", {"data_dir": str(tmp_path), "source": "strokes_npy"})


def test_synthetic_source_is_labelled_and_seeded():
  a = data.load("iamondb", {"source": "synthetic", "synthetic_size": 20})
  b = data.load("iamondb", {"source": "synthetic", "synthetic_size": 20})
  assert a.source == "synthetic" and "SYNTHETIC" in a.notes and a.describe()["synthetic"]
  np.testing.assert_array_equal(a.splits["train"]["strokes"], b.splits["train"]["strokes"])
  lengths = a.splits["train"]["length"]
  assert (lengths > 0).all() and a.splits["train"]["strokes"].shape[1] == 500
