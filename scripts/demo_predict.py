"""Load an installed (pip) pipeline package by name and print the entities it finds.

    python scripts/demo_predict.py PACKAGE_NAME TEXT_FILE
"""
import sys

import spacy


def main(package: str, text_file: str) -> None:
    nlp = spacy.load(package)
    with open(text_file, encoding="utf8") as f:
        texts = [line.strip() for line in f if line.strip()]
    for doc in nlp.pipe(texts):
        print(doc.text)
        for span in doc.spans.get("sc", []):
            print(f"    {span.label_:<10} {span.text}")
        if not doc.spans.get("sc"):
            print("    (no entity found)")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(*sys.argv[1:])
