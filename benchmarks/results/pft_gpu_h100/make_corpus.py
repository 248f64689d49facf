"""SciERC json (doc per line) -> PFT JSONL with the gold entities as candidates."""
import json
import sys
with open(sys.argv[1]) as f, open(sys.argv[2], "w") as out:
    for line in f:
        doc = json.loads(line)
        offset = 0
        for tokens, ents in zip(doc["sentences"], doc["ner"]):
            cands = [[s - offset, e - offset + 1, "gold"] for s, e, _ in ents]
            out.write(json.dumps({"text": " ".join(tokens), "tokens": tokens, "candidates": cands}) + "\n")
            offset += len(tokens)
