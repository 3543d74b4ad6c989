"""drsftp/http/davlist.py: a PROPFIND 207 parsed as it streams in."""

import pytest

from drsftp.http.davlist import PROPFIND_BODY, Entry, ListingError, MultistatusParser

DOC = (b'<?xml version="1.0"?><D:multistatus xmlns:D="DAV:">'
       b"<D:response><D:href>/dir/</D:href><D:propstat><D:prop><D:resourcetype><D:collection/></D:resourcetype>"
       b"</D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response>"
       b"<D:response><D:href>http://h/dir/a%20b.bin</D:href><D:propstat><D:prop><D:resourcetype/>"
       b"<D:getcontentlength>42</D:getcontentlength>"
       b"<D:getlastmodified>Sun, 06 Nov 1994 08:49:37 GMT</D:getlastmodified></D:prop>"
       b"<D:status>HTTP/1.1 200 OK</D:status></D:propstat>"
       b"<D:propstat><D:prop><D:getcontentlength>7</D:getcontentlength></D:prop>"
       b"<D:status>HTTP/1.1 404 Not Found</D:status></D:propstat></D:response>"
       b"<D:response><D:href>/dir/sub/</D:href><D:propstat><D:prop><D:resourcetype><D:collection/>"
       b"</D:resourcetype></D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response>"
       b"</D:multistatus>")


def test_entries_come_out_as_bytes_arrive():
    p, got = MultistatusParser(), []
    for i in range(0, len(DOC), 7):
        got += p.feed(DOC[i:i + 7])
    got += p.close()
    assert got == [Entry("/dir", True, None, None), Entry("/dir/a b.bin", False, 42, 784111777.0),
                   Entry("/dir/sub", True, None, None)]
    assert got[1].name == "a b.bin" and got[2].name == "sub"


def test_malformed_and_truncated_listings_are_errors():
    with pytest.raises(ListingError):
        MultistatusParser().feed(b"<D:multistatus xmlns:D='DAV:'><oops></D:multistatus>")
    p = MultistatusParser()
    p.feed(DOC[:100])
    with pytest.raises(ListingError):
        p.close()


def test_the_request_body_asks_the_three_properties():
    assert b"resourcetype" in PROPFIND_BODY and b"getcontentlength" in PROPFIND_BODY
    assert b"getlastmodified" in PROPFIND_BODY
