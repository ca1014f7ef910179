"""remote.py without a server: which inputs are URIs, and a URI streamed through pyarrow.fs."""

from kinspect.spark.plan import Input
from kinspect.spark.remote import _s3, is_uri, open_uri
from kinspect.spark.task import file_rows
from tests.conftest import PCAPS


def test_uris_are_told_from_paths():
    assert is_uri("s3a://bucket/captures/") and is_uri("hdfs://nn:8020/x") and is_uri("gs://b/o")
    assert not is_uri("captures/a.pcap") and not is_uri("/abs/b.pcap") and not is_uri("file:///tmp/a.pcap")
    assert not is_uri("weird name://x")  # a scheme is letters and digits only


def test_a_uri_is_streamed_with_the_same_rows_as_the_path(tmp_path):
    capture = PCAPS / "librdkafka-mtu1500.pcap"
    stream = open_uri(f"local://{capture}")  # pyarrow's LocalFileSystem behind a URI
    assert stream.read(4) and str(stream) == f"local://{capture}"
    stream.close()
    direct = [r for r in file_rows(Input(str(capture), 0)) if r["table"] == "exchanges"]
    streamed = [r for r in file_rows(Input(f"local://{capture}", 0)) if r["table"] == "exchanges"]
    strip = lambda rows: [{k: v for k, v in r.items() if k != "capture"} for r in rows]  # noqa: E731
    assert strip(streamed) == strip(direct) and streamed[0]["capture"] == f"local://{capture}"
    (missing,) = file_rows(Input(f"local://{tmp_path}/none.pcap", 0))
    assert missing["table"] == "files" and "none.pcap" in missing["file_error"]


def test_s3a_settings_become_pyarrow_s3_arguments():
    fs = _s3({"s3": {"endpoint": "http://127.0.0.1:9000", "access_key": "a", "secret_key": "b"}})
    assert fs.region == "us-east-1" and type(fs).__name__ == "S3FileSystem"
