1 'tag1|a x y:2 |b z 12 |bb w:0.5
-1 abc| f g:3
| h i:-1.5
2 0.5 'q |ns:0.5 p:4 3
0 |a x:0 y
1 |a x|b y
1 |a :3 k
-1 |café naïve:2 日本語 |b ü
1 |alpha one two |apple three |beta four
-1 |a x:1e-3 y:.5 z:5. w:-0.25 v:1E+2
1 |c c1 c2 c3 |a x
1 |a 123456789012 00042 |b 4294967297
3 |a x |a x |a y
1 'tag-with-dash |c p q r:2
-1 |b only_b
1 |a x:2.5 |b y:-2 |c z:4
 1   |a  spaced   out  
0.5 |A upper Case |b lower
7 |12 x y |0 z
-1 |a:2 x y:0.25 |b:-1 u
