import { describe, expect, it } from "vitest";
import { declaresMoreThan, readTextUpTo, readUpTo, TOO_LARGE } from "../../src/shared/bounded-body.js";

/** A stream of `chunks`, recording whether the reader cancelled it and how many chunks it pulled. */
function streamOf(chunks: Uint8Array[]) {
  const seen = { pulled: 0, cancelled: false };
  let index = 0;
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (index === chunks.length) return controller.close();
      seen.pulled++;
      controller.enqueue(chunks[index++]!);
    },
    cancel() {
      seen.cancelled = true;
    },
  });
  return { stream, seen };
}

const bytes = (n: number, fill = 0x61) => new Uint8Array(n).fill(fill);

describe("bounded body reads", () => {
  it("reads a body of exactly the limit, joined from its chunks", async () => {
    const { stream, seen } = streamOf([bytes(3), bytes(4, 0x62), bytes(3, 0x63)]);
    expect(await readTextUpTo(stream, 10)).toBe("aaabbbbccc");
    expect(seen.cancelled).toBe(false);
  });

  it("hostile: one byte past the limit is TOO_LARGE, and the stream is cancelled, not drained", async () => {
    const chunks = [bytes(6), bytes(5), ...Array.from({ length: 1000 }, () => bytes(1024))];
    const { stream, seen } = streamOf(chunks);
    expect(await readUpTo(stream, 10)).toBe(TOO_LARGE);
    expect(seen.cancelled).toBe(true);
    expect(seen.pulled).toBeLessThan(5);
  });

  it("an absent body is empty", async () => {
    expect(await readUpTo(null, 0)).toEqual(new Uint8Array(0));
    expect(await readTextUpTo(null, 10)).toBe("");
  });

  it("a stream that fails hands its error to the caller", async () => {
    const failing = new ReadableStream<Uint8Array>({
      pull(controller) {
        controller.error(new Error("connection reset"));
      },
    });
    await expect(readUpTo(failing, 10)).rejects.toThrow("connection reset");
  });

  it("hostile: only a plain decimal Content-Length above the limit refuses before reading", () => {
    const headers = (value: string) => new Headers({ "content-length": value });
    expect(declaresMoreThan(headers("11"), 10)).toBe(true);
    expect(declaresMoreThan(headers("10"), 10)).toBe(false);
    // Not a length: left to the counted read, which a lie cannot pass.
    for (const odd of ["1e9", "0x100", "-1", "11, 11", "abc"]) {
      expect(declaresMoreThan(headers(odd), 10)).toBe(false);
    }
    expect(declaresMoreThan(new Headers(), 10)).toBe(false);
  });
});
