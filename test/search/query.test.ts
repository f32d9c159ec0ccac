import { describe, expect, it } from "vitest";
import { parseQuery, QueryError } from "../../src/search/query.js";
import { preview, searchText, words } from "../../src/search/text.js";

describe("query parser", () => {
  it("splits words and lowercases them", () => {
    expect(parseQuery("Refund  ORDER")).toEqual({ terms: [["refund"], ["order"]] });
  });

  it("reads quoted phrases and escaped quotes", () => {
    expect(parseQuery('refund "Order 1234" now')).toEqual({ terms: [["refund"], ["order", "1234"], ["now"]] });
    expect(parseQuery('say \\"hi\\" there')).toEqual({ terms: [["say"], ["hi"], ["there"]] });
    expect(parseQuery('"a \\"quoted\\" word"')).toEqual({ terms: [["a", "quoted", "word"]] });
  });

  it("treats a chunk that splits into several words as a phrase", () => {
    expect(parseQuery("get_weather e-mail")).toEqual({ terms: [["get", "weather"], ["e", "mail"]] });
  });

  it("is Unicode aware", () => {
    expect(parseQuery("Ünïcode 東京 ＡＢＣ")).toEqual({ terms: [["ünïcode"], ["東京"], ["abc"]] });
  });

  it("drops repeated terms and empty phrases", () => {
    expect(parseQuery('cat CAT "" cat')).toEqual({ terms: [["cat"]] });
  });

  it("returns null for an empty query", () => {
    expect(parseQuery("")).toBeNull();
    expect(parseQuery("   ")).toBeNull();
  });

  it("rejects an unclosed quote and a query without words", () => {
    expect(() => parseQuery('refund "order')).toThrow(QueryError);
    expect(() => parseQuery("?! -- ...")).toThrow(/no word/);
    expect(() => parseQuery('""')).toThrow(QueryError);
    try {
      parseQuery('"x');
    } catch (err) {
      expect((err as QueryError).loc).toEqual(["body", "query"]);
      expect((err as QueryError).type).toBe("value_error.query.unclosed_quote");
    }
  });
});

describe("search text", () => {
  it("keeps only words, space separated and padded", () => {
    expect(searchText("Hello, World! it's 2026")).toBe(" hello world it s 2026 ");
    expect(searchText("...")).toBe(" ");
    expect(words("café naïve")).toEqual(["café", "naïve"]);
  });

  it("caps very long words", () => {
    expect(words("a".repeat(300))[0]).toHaveLength(100);
  });

  it("cuts previews without splitting surrogate pairs", () => {
    expect(preview("a".repeat(498) + "😀")).toBe("a".repeat(498) + "😀");
    expect(preview("a".repeat(499) + "😀b")).toBe("a".repeat(499));
    expect(preview("short")).toBe("short");
  });
});
