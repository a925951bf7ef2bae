"""Parts of the API backend (``backends/openai_compat.py``), one concept each:

- ``config``: what a spec sets (``APIConfig``) and the identity it gives;
- ``errors``: failures by type (a refusal, a feature ignored, a malformed body);
- ``positions``: the local tokenizer's positions and the mapping of server strings to them;
- ``modes``: one object per query mode (its request, parsing and alignment);
- ``transport``: one HTTP request with bounded retries, every attempt counted in the Budget;
- ``probe``: what the server supports, found once per endpoint (``ServerProfile``).
"""
