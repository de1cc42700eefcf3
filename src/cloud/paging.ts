/*
 * Listings end. A listing follows the API's own word for what comes next (a NextToken, a
 * TotalCount), so an API that repeats a token or miscounts would have it page forever, or stop
 * early and pass a part for the whole. Each page's answer is checked against what the pages
 * before it and its own count promise; a page that breaks the promise is a bad answer.
 */

/** The most pages one listing reads: 5 million ENIs at 500 a page, and a bound to any loop. */
export const MAX_PAGES = 10_000;

/** An opaque token, shortened for a message. */
const shown = (token: string): string => JSON.stringify(token.length > 24 ? `${token.slice(0, 24)}…` : token);

/** A NextToken listing: every token answered must be new, and the pages are bounded. */
export class TokenListing {
  private readonly seen = new Set<string>();
  /** Pages read so far. */
  pages = 0;

  constructor(private readonly maxPages = MAX_PAGES) {}

  /** What is wrong with the next page answering `nextToken`, if anything; nothing is noted. */
  problem(nextToken: string): string | undefined {
    if (!nextToken) return undefined;
    if (this.seen.has(nextToken))
      return `NextToken ${shown(nextToken)} came back on page ${this.pages + 1}; following it would page forever`;
    if (this.pages + 1 >= this.maxPages)
      return `still a NextToken after ${this.maxPages} pages, more than a listing reads`;
    return undefined;
  }

  /** Notes a page read: the token to send next, or undefined at the end. */
  next(nextToken: string): string | undefined {
    this.pages++;
    if (!nextToken) return undefined;
    this.seen.add(nextToken);
    return nextToken;
  }
}

/** A PageNumber/PageSize listing: each page holds what its TotalCount promises, and the pages are bounded. */
export class NumberedListing {
  /** The page to ask for next, from 1. */
  page = 1;

  constructor(
    readonly pageSize: number,
    private readonly maxPages = MAX_PAGES,
  ) {}

  private promised(totalCount: number): number {
    return Math.min(this.pageSize, Math.max(0, totalCount - (this.page - 1) * this.pageSize));
  }

  /** What is wrong with the current page listing `items` of `totalCount`, if anything. */
  problem(items: number, totalCount: number): string | undefined {
    const promised = this.promised(totalCount);
    if (items !== promised) {
      return (
        `page ${this.page} lists ${items} items where its TotalCount ${totalCount} promises ${promised}` +
        (items < promised ? ': the listing would be incomplete' : ': more than it counts')
      );
    }
    if (this.page >= this.maxPages && this.page * this.pageSize < totalCount)
      return `TotalCount ${totalCount} needs more than ${this.maxPages} pages of ${this.pageSize}, more than a listing reads`;
    return undefined;
  }

  /** Notes the current page read; true when it was the last. */
  next(totalCount: number): boolean {
    const last = this.page * this.pageSize >= totalCount;
    this.page++;
    return last;
  }
}
