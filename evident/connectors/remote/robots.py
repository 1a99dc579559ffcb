"""robots.txt as RFC 9309 reads it, through Protego.

The rule that applies to a path is the longest matching one (an `Allow` wins a tie), `*` matches any
run of characters and `$` anchors the end; the standard library's parser applies the first matching
rule and knows neither, so `Disallow: /` before `Allow: /guide/` would refuse a whole site to it.
"""

from __future__ import annotations

from dataclasses import dataclass

from protego import Protego

AGENT = "EvidenT"  # the product token robots.txt groups are matched against
MAX_ROBOTS_CHARS = 500_000  # RFC 9309 lets crawlers ignore what follows the first 500 KiB


@dataclass(frozen=True)
class Robots:
    """What one site's robots.txt lets the crawler fetch."""

    rules: Protego | None = None
    everything: bool = True  # without rules: True for "allowed" (no robots.txt), False for "do not crawl"

    @classmethod
    def parse(cls, text: str) -> Robots:
        return cls(rules=Protego.parse(text[:MAX_ROBOTS_CHARS]))

    @classmethod
    def allow_all(cls) -> Robots:
        return cls(everything=True)

    @classmethod
    def disallow_all(cls) -> Robots:
        return cls(everything=False)

    def allowed(self, url: str) -> bool:
        if self.rules is None:
            return self.everything
        return bool(self.rules.can_fetch(url, AGENT))

    def crawl_delay(self) -> float:
        """Seconds between requests the site asks of this crawler (0: no wish)."""
        if self.rules is None:
            return 0.0
        delay = self.rules.crawl_delay(AGENT)
        if delay:
            return float(delay)
        rate = self.rules.request_rate(AGENT)
        return rate.seconds / rate.requests if rate is not None and rate.requests else 0.0
