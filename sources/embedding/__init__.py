"""The embedding model: MiniLM as int8 ONNX on onnxruntime, its WordPiece tokenizer, the int8
weight rewrite and the checks every embedder's output passes.

It stands beside the storage engines and under the sources: it imports neither (only
`sources._exceptions`), and the public names are re-exported by `sources`.
"""
