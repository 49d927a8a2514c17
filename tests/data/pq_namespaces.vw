1 |a x y |b k:2
0 |a z
1 |b m:0.5 x:1
