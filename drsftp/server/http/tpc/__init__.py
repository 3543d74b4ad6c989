"""HTTP third-party copy and its tokens on `drsftp serve`'s HTTPS side
(docs/HTTP.md, "Third-party copy"; docs/SECURITY.md).

handlers: COPY and the macaroon POST, from service.py; tokens: macaroons
(pymacaroons) minted and verified; guard: --third-party-peers for every
remote and redirect (SSRF); copy: the 202 and its perf markers; pull and
push: the two directions; remote: the outbound connections, each tuned.
"""
